"""The runner runs in the sandbox image, which has no Django."""

import subprocess
import sys
from pathlib import Path

from tests.runner.helpers import REPO

RUNNER = REPO / "runner"


def test_runner_modules_never_import_django():
    modules = [
        "runner", "runner.cli", "runner.sim.grading", "runner.sim", "runner.sim.host",
        "runner.candidate.program",
    ]
    code = (
        "import sys\n"
        + "".join(f"import {m}\n" for m in modules)
        + "from runner.exercise import load\n"
        + "for slug in ('async-gradient-accumulation', 'pipeline-model-parallel',"
        + " 'async-parameter-server'):\n"
        + "    load(slug)\n"
        + "print(sorted(m for m in sys.modules if m.split('.')[0] == 'django'))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "[]"


def test_no_runner_source_mentions_django_imports():
    offenders = []
    for path in RUNNER.rglob("*.py"):
        if "sandbox" in path.relative_to(RUNNER).parts:
            continue  # owned by the sandbox backends, checked by their own tests
        text = Path(path).read_text()
        if "import django" in text or "from django" in text:
            offenders.append(str(path))
    assert offenders == []
