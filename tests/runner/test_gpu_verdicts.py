"""Verdicts from the GPU timing, through the whole grading path on a CPU.

The device clock is replaced by a scripted one, so the numbers are exact: one epoch's
copies take 0.48 s, its compute 1.0 s, the starter 10.5 s. With the CPU sizes the
sequential run stops after epoch 6 and an epoch has 24 batches (8 training, 16
validation), so no program can beat 7 x max(0.48, 1.0) + 0.48 / 24 = 7.02 s: the bound
is 10.5 / 7.02 = 1.4957x and the target (half the hideable time) 1.1986x.
"""

import pytest

from runner.exercise import load
from runner.gpu import grading, timing

SLUG = "gpu-gradient-accumulation"
BASELINE_SECONDS = 10.5


def scripted_clock(candidate_seconds):
    class Scripted:
        kind = "scripted"

        def __init__(self, device):
            self.trials = 0

        def synchronize(self):
            pass

        def time(self, fn):
            value = fn()
            if value.phase != timing.TRIAL:
                return 1.0, value  # reference and checked runs: not compared
            self.trials += 1
            odd = self.trials % 2 == 1  # A B A B: odd calls are the baseline's
            return (BASELINE_SECONDS if odd else candidate_seconds), value

    return Scripted


def scripted_components(harness):
    # timed alone in a (trusted) run process by its device clock; scripted here
    return {
        "copy_epoch": timing.Spread.of([0.48]),
        "compute_epoch": timing.Spread.of([1.0]),
    }


def graded(monkeypatch, candidate_seconds):
    monkeypatch.setattr(timing, "Clock", scripted_clock(candidate_seconds))
    monkeypatch.setattr(grading._Harness, "components", scripted_components)
    exercise = load(SLUG)
    return grading.grade(exercise, exercise.starter, device="cpu", trials=3)


def check(result, name):
    return next(c for c in result["checks"] if c["name"] == name)


def test_hiding_most_of_the_validation_time_is_accepted(monkeypatch):
    result = graded(monkeypatch, 8.0)
    metrics = result["metrics"]
    assert result["verdict"] == "accepted", result["message"]
    assert metrics["bound_speedup"] == pytest.approx(10.5 / 7.02, abs=1e-4)
    assert metrics["target_speedup"] == pytest.approx(1.1986, abs=1e-4)
    assert metrics["speedup"] == pytest.approx(10.5 / 8.0, abs=1e-4)
    assert metrics["overlap"] == pytest.approx(0.7184, abs=1e-4)
    assert metrics["best_time"] == pytest.approx(7.02)
    assert metrics["baseline_times"] == [10.5] * 3 and metrics["candidate_times"] == [8.0] * 3


def test_hiding_too_little_is_too_slow_with_the_target_in_the_message(monkeypatch):
    result = graded(monkeypatch, 10.0)
    assert result["verdict"] == "too_slow"
    assert "1.05x faster" in result["message"] and "1.20x" in result["message"]


def test_faster_than_the_bound_is_implausible(monkeypatch):
    result = graded(monkeypatch, 5.0)
    assert result["verdict"] == "wrong"
    assert check(result, "plausible")["status"] == "fail"
    assert "above the best possible 1.50x" in check(result, "plausible")["message"]


def test_within_the_noise_margin_above_the_bound_is_still_plausible(monkeypatch):
    result = graded(monkeypatch, 6.8)  # 1.54x: above 1.50x, below 1.50 x 1.15
    assert check(result, "plausible")["status"] == "pass"
    assert result["verdict"] == "accepted"
