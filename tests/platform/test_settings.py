import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
STRONG_KEY = "k9Qz-7rT2_vLx4Wm8NbE5cYp1HfGa3Ds6JuKo0Ri2ZlVw8XeTq4Mn"
BOOT = "import django; django.setup(); from django.conf import settings; print(settings.DEBUG)"


def _boot(**env):
    base = {"PATH": os.environ["PATH"], "PYTHONPATH": f"{ROOT / 'platform'}:{ROOT}",
            "DJANGO_SETTINGS_MODULE": "overlap.settings"}
    return subprocess.run([sys.executable, "-c", BOOT], capture_output=True, text=True,
                          env={**base, **env}, cwd=ROOT)


def test_production_start_refuses_a_missing_secret_key():
    result = _boot(DEBUG="0")
    assert result.returncode != 0
    assert "SECRET_KEY is not set" in result.stderr


def test_production_start_with_a_secret_key_works():
    result = _boot(DEBUG="0", SECRET_KEY=STRONG_KEY, DATABASE_URL="sqlite:///:memory:")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"


def test_development_start_needs_no_secret_key(tmp_path):
    result = _boot(DEBUG="1", OVERLAP_VAR_DIR=str(tmp_path))
    assert result.returncode == 0, result.stderr
