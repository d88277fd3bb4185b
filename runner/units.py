"""Machine-speed units for benchmark figures: seconds divided by what this machine does in
a fixed piece of work, measured in the same run.

The machines Overlap is measured on differ 3x in raw speed and drift within an hour, so a
figure in seconds alone compares nothing. The units come from a script kept outside the
product and shared by every machine that reports figures (``OVERLAP_PLU``; by default
``shared/bench/plu.py`` beside the checkout): ``loop`` (a pure-Python loop) and ``proc``
(process and IPC work, what a grading is heavy in). Without it, figures stay in seconds
and say so.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SCRIPT = os.environ.get(
    "OVERLAP_PLU", str(Path(__file__).resolve().parents[2] / "shared" / "bench" / "plu.py")
)


def measure(repeats: int = 3) -> dict[str, float]:
    """``{"loop": s, "proc": s}`` measured now, or {} when the script is not there."""
    if not Path(SCRIPT).is_file():
        return {}
    try:
        out = subprocess.run([sys.executable, SCRIPT, str(repeats)], capture_output=True,
                             text=True, timeout=300, check=True).stdout
        return {k: float(v) for k, v in (item.split("=", 1) for item in out.split() if "=" in item)}
    except (OSError, ValueError, subprocess.SubprocessError):
        return {}


def describe(units: dict[str, float]) -> str:
    if not units:
        return f"units: not measured ({SCRIPT} not found; set OVERLAP_PLU)"
    return f"units (measured now, {SCRIPT}): loop={units['loop']:.3f} s proc={units['proc']:.3f} s"


def in_proc(seconds: float | None, units: dict[str, float]) -> str:
    """``seconds`` in proc units ("2.67"), or "" when not measured."""
    if seconds is None or not units.get("proc"):
        return ""
    return f"{seconds / units['proc']:.2f}"
