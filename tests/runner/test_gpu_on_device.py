"""On a machine with a CUDA device: the GPU exercise's golden verdicts, measured for real.

Skipped without a GPU (the rest of tests/runner covers the path up to the device). With
``OVERLAP_GPU_RESULTS=DIR`` every result is also written to DIR, for
``python -m runner.gpu.calibrate table --results DIR``.
"""

import functools
import json
import os
import time
from pathlib import Path

import pytest
import torch

from runner import tracks
from runner.exercise import load

SLUG = "gpu-gradient-accumulation"
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@functools.cache
def graded(path: str) -> dict:
    began = time.perf_counter()
    result = tracks.grade(SLUG, path)
    result["wall_s"] = round(time.perf_counter() - began, 1)
    keep = os.environ.get("OVERLAP_GPU_RESULTS")  # python -m runner.gpu.calibrate table
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        (Path(keep) / f"{Path(path).stem}.json").write_text(json.dumps(result))
    return result


def failing(result):
    return sorted(c["name"] for c in result["checks"] if c["status"] == "fail")


def _cases():
    exercise = load(SLUG)
    yield pytest.param(str(exercise.solution), "accepted", [], id="solution")
    yield pytest.param(str(exercise.starter), "too_slow", [], id="starter")
    for example in exercise.examples():
        params = (str(example.path), example.verdict, list(example.failing))
        yield pytest.param(*params, id=example.name)


@pytest.mark.parametrize(("path", "verdict", "failing_checks"), list(_cases()))
def test_file_gets_its_expected_verdict_on_the_gpu(path, verdict, failing_checks):
    result = graded(path)
    assert (result["verdict"], failing(result)) == (verdict, failing_checks), result["message"]


def test_the_reference_reaches_the_target_and_stays_under_the_bound():
    metrics = graded(str(load(SLUG).solution))["metrics"]
    assert metrics["clock"] == "perf_counter"  # the grader's clock around each run
    assert metrics["target_speedup"] <= metrics["speedup"] <= metrics["bound_speedup"] * 1.15


def test_the_reference_passes_with_margin_and_its_timeline_shows_copies_under_compute():
    result = graded(str(load(SLUG).solution))
    metrics = result["metrics"]
    assert metrics["target_speedup"] <= 0.8 * metrics["speedup"]
    spans = result["trace"]["candidate"]["spans"]
    copies = [s for s in spans if s["op"] == "copy"]
    compute = [s for s in spans if s["op"] == "train"]
    assert copies and {s["lane"] for s in copies}.isdisjoint({s["lane"] for s in compute})
    under = sum(
        1 for c in copies if any(t["start"] < c["end"] and c["start"] < t["end"] for t in compute)
    )
    assert under >= len(copies) // 2  # most copies ran while a batch was training


def test_the_starter_warns_about_its_host_syncs():
    result = graded(str(load(SLUG).starter))
    check = next(c for c in result["checks"] if c["name"] == "host_syncs")
    assert check["status"] == "warn" and "item()" in check["message"]
