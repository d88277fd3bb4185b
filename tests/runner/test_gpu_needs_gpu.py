"""Without a GPU a GPU exercise says so (verdict needs_gpu, status skip), and CI stays green."""

import json

import pytest
import torch
import yaml

from runner import tracks
from runner.exercise import load
from runner.gpu import grading
from tests.runner.helpers import EXERCISES, run_cli

SLUG = "gpu-gradient-accumulation"
FOLDER = EXERCISES / SLUG
no_cuda = pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")


@no_cuda
def test_grade_answers_needs_gpu_as_one_json_document_and_exit_zero():
    done = run_cli("grade", str(FOLDER), str(FOLDER / "solution.py"))
    assert done.returncode == 0
    result = json.loads(done.stdout)
    assert result["schema"] == "overlap.grade/1"
    assert (result["status"], result["verdict"]) == ("skip", "needs_gpu")
    assert "GPU" in result["message"] and "gpu" in result["message"]
    assert result["checks"] == []
    assert result["metrics"]["speedup"] is None
    assert result["metrics"]["clock"] == "perf_counter"
    assert result["trace"] == {"baseline": None, "candidate": None}


def test_needs_gpu_runs_nothing_of_the_candidate(monkeypatch, write_code, tmp_path):
    monkeypatch.setattr(grading, "cuda_available", lambda: False)
    marker = tmp_path / "ran"
    code = write_code(f"open({str(marker)!r}, 'w').close()\nprint('ran')\n")
    result = tracks.grade(SLUG, code)
    assert (result["status"], result["verdict"]) == ("skip", "needs_gpu")
    assert not marker.exists()
    assert result["stdout"] == ""


def test_a_syntax_error_is_still_reported_without_a_gpu(monkeypatch, write_code):
    monkeypatch.setattr(grading, "cuda_available", lambda: False)
    result = tracks.grade(SLUG, write_code("class Trainer(:\n    pass\n"))
    assert result["verdict"] == "syntax_error"
    assert result["error"]["line"] == 1


@no_cuda
def test_validate_skips_gpu_validation_and_exits_zero():
    done = run_cli("validate", str(FOLDER))
    assert done.returncode == 0, done.stdout
    assert "skip GPU validation: no CUDA device here" in done.stdout
    assert "GPU validation skipped (no GPU): gpu-gradient-accumulation" in done.stdout
    assert "FAIL" not in done.stdout


@no_cuda
def test_validate_json_marks_every_file_skipped():
    done = run_cli("validate", str(FOLDER), "--json")
    assert done.returncode == 0
    rows = json.loads(done.stdout)[SLUG]
    files = {row["file"] for row in rows}
    assert {"solution.py", "starter.py", "examples/no_record_stream.py"} <= files
    assert all(row["skipped"] and row["ok"] and row["verdict"] == "needs_gpu" for row in rows)


def test_bench_leaves_gpu_exercises_out():
    done = run_cli("bench", str(FOLDER), "--repeat", "1")
    assert done.returncode == 0
    assert "gpu-gradient-accumulation" in done.stdout
    assert "skipped: a GPU exercise" in done.stdout


def test_the_catalog_track_and_the_grader_agree_on_gpu():
    # The web app routes runs by exercise.yaml's track (queue "gpu"); the runner grades
    # by the grader's declaration. They must say the same thing.
    meta = yaml.safe_load((FOLDER / "exercise.yaml").read_text())
    assert meta["track"] == "gpu"
    assert load(SLUG).track == "gpu"
    assert load("async-gradient-accumulation").track == "simulated"
