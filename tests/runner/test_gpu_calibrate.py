"""The calibration command for a lent GPU, run here without one: the order it grades in,
what it writes as it goes, the time budget, and the table it ends with."""

import json

import pytest
import torch

from runner.exercise import load
from runner.gpu import calibrate

SLUG = "gpu-gradient-accumulation"
pytestmark = pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU path of calibrate")


def test_all_grades_the_deciding_files_first_and_writes_each_result_and_the_table(tmp_path):
    calibrate.main(["all", "--results", str(tmp_path), "--times", "3", "--budget", "600"])
    names = sorted(p.stem for p in tmp_path.glob("*.json") if p.stem != "probe")
    examples = [e.name for e in load(SLUG).examples()]
    assert names == sorted(
        ["solution-1", "solution-2", "solution-3", "starter-1", *(f"{n}-1" for n in examples)]
    )
    assert json.loads((tmp_path / "probe.json").read_text()) == {}  # no device to probe
    result = json.loads((tmp_path / "one_stream-1.json").read_text())
    assert result["verdict"] == "needs_gpu" and result["wall_s"] >= 0
    table = (tmp_path / "table.md").read_text()
    assert "| no overlap | bound | target |" in table
    assert table.count("| needs_gpu |") == len(names)


def test_all_starts_no_grading_its_budget_cannot_hold(tmp_path, capsys):
    calibrate.main(["all", "--results", str(tmp_path), "--budget", "0"])
    assert not [p for p in tmp_path.glob("*.json") if p.stem != "probe"]
    assert "stopped before solution" in capsys.readouterr().out


def test_the_table_gives_the_zero_point_and_the_reference_over_its_gradings(tmp_path):
    for number, speedup in enumerate((1.9, 2.1, 2.0), 1):
        metrics = {"speedup": speedup, "zero_speedup": 1.31, "bound_speedup": 2.6,
                   "target_speedup": 1.62, "overlap": 0.7,
                   "speedup_spread": {"q1": 1.8, "q3": 2.2, "min": 1.7, "max": 2.3}}  # fmt: skip
        result = {"verdict": "accepted", "metrics": metrics, "wall_s": 40.0}
        (tmp_path / f"solution-{number}.json").write_text(json.dumps(result))
    text = calibrate.table(tmp_path)
    assert "| solution-1 | accepted | 1.90 | 1.80-2.20 | 1.70-2.30 | 1.31 | 2.60 | 1.62 |" in text
    assert "reference over 3 gradings: median 2.000x" in text
