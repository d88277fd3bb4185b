"""The repository's shape keeps the standard library's `platform` module reachable."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_platform_folder_is_not_a_package():
    # A platform/__init__.py would shadow the stdlib module Django, Celery and pytest import.
    assert not (ROOT / "platform" / "__init__.py").exists()


def test_stdlib_platform_module_still_wins_with_our_import_path():
    code = (
        "import sys; sys.path[:0] = [sys.argv[1], sys.argv[2]];"
        "import platform; print(platform.__file__); print(platform.python_version())"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(ROOT / "platform"), str(ROOT)],
        capture_output=True, text=True, check=True, cwd=ROOT,
    ).stdout.splitlines()
    assert not out[0].startswith(str(ROOT)), out[0]
    assert out[1] == ".".join(map(str, sys.version_info[:3]))


def test_manage_py_boots_django_from_a_fresh_interpreter():
    result = subprocess.run(
        [sys.executable, "manage.py", "check"], capture_output=True, text=True, cwd=ROOT,
        env={"PATH": "/usr/bin:/bin", "DEBUG": "1"},
    )
    assert result.returncode == 0, result.stderr
    assert "no issues" in result.stdout


def test_test_modules_have_unique_names():
    # The test folders are not packages (rootdir-relative imports): two test files with
    # one name in different folders stop the whole run at collection.
    names = [path.name for path in (ROOT / "tests").rglob("test_*.py")]
    assert sorted({n for n in names if names.count(n) > 1}) == []
