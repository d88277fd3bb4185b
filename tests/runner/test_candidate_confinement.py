"""Nothing the candidate may not know is readable from its process: not the exercise's
grader, reference or examples, not the checkout, not a secret config field.

The candidate's process takes away its own filesystem access with Landlock right after
its fork (runner/landlock.py): the standard library (a lazy ``import statistics``) stays
readable, nothing else is: not /proc either, where a process can read its own memory
(the runtime's, with the key that seals the run's end). Where the kernel has no Landlock
the tests that need it are skipped; the secret config field is withheld everywhere."""

import json

import pytest

from runner import landlock
from tests.runner.helpers import EXERCISES, run_cli

READS = """
import os


class Trainer:
    def __init__(self, cluster):
        self.model = cluster.model
        self.config = cluster.config

    def train(self):
        import decimal, fractions, statistics  # noqa: F401 (lazy standard-library imports)
        found = []
        for path in {paths!r}:
            try:
                with open(path) as f:
                    f.read(1)
                found.append("read " + path)
            except OSError as exc:
                found.append("refused " + type(exc).__name__)
        found.append("listing / " + ("refused" if not _listable("/") else "allowed"))
        print(chr(10).join(found))
        return self.model.snapshot()


def _listable(path):
    try:
        os.listdir(path)
        return True
    except OSError:
        return False
"""


@pytest.mark.skipif(landlock.abi() < 1, reason="this kernel has no Landlock")
def test_the_exercise_files_and_the_checkout_cannot_be_read_from_a_run(tmp_path):
    secrets = [
        str(EXERCISES / "straggler-backup-workers" / "grader.py"),
        str(EXERCISES / "async-gradient-accumulation" / "solution.py"),
        str(EXERCISES / "async-gradient-accumulation" / "examples" / "race_no_lock.py"),
        str(EXERCISES.parent / "README.md"),
        "/etc/hostname",
        "/proc/self/mem",
        "/proc/self/environ",
        "/proc/self/maps",
    ]
    path = tmp_path / "reads.py"
    path.write_text(READS.format(paths=secrets))
    result = json.loads(run_cli("grade", "async-gradient-accumulation", str(path),
                                "--seeds", "1").stdout)
    lines = result["stdout"].split("\n")
    assert lines[: len(secrets)] == ["refused PermissionError"] * len(secrets), lines
    assert "listing / refused" in lines
    assert result["verdict"] != "runtime_error", result["message"]  # imports still work


def test_a_secret_config_field_never_reaches_the_trainer(tmp_path):
    path = tmp_path / "seed.py"
    path.write_text(
        "class Trainer:\n"
        "    def __init__(self, cluster):\n"
        "        print(dir(cluster.config))\n"
        "        self.seed = cluster.config.seed\n"
        "    def train(self):\n"
        "        return None\n"
    )
    result = json.loads(run_cli("grade", "straggler-backup-workers", str(path)).stdout)
    assert result["verdict"] == "runtime_error"
    assert "has no attribute 'seed'" in result["message"]
    assert "seed" not in result["stdout"] and "straggle_rate" in result["stdout"]
