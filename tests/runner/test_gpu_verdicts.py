"""Verdicts from the GPU timing, through the whole grading path on a CPU.

The device clock is replaced by a scripted one, so the numbers are exact: one epoch's
copies take 0.48 s, its compute 1.0 s, the same epoch done serially with no host waits
(copies, then compute, on one stream) 1.48 s, the starter 10.5 s. With the CPU sizes
the sequential run stops after epoch 6 and an epoch has 24 batches (8 training, 16
validation), so no program can beat 7 x max(0.48, 1.0) + 0.48 / 24 = 7.02 s: the bound
is 10.5 / 7.02 = 1.4957x. With no overlap at all the work takes 7 x 1.48 = 10.36 s (the
zero point, 10.5 / 10.36 = 1.0135x); the target hides half of what lies between: 8.69 s,
1.2083x.
"""

import dataclasses

import pytest

from runner.exercise import load
from runner.gpu import grading, timing

SLUG = "gpu-gradient-accumulation"
BASELINE_SECONDS = 10.5
BEST, SERIAL = 7 * 1.0 + 0.48 / 24, 7 * 1.48


def target_time(fraction=0.5):
    return SERIAL - fraction * (SERIAL - BEST)


def scripted_clock(candidate_seconds, baseline_seconds):
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
            return (baseline_seconds if odd else candidate_seconds), value

    return Scripted


def scripted_components(harness):
    # timed alone in a (trusted) run process by its device clock; scripted here
    return {
        "copy_epoch": timing.Spread.of([0.48]),
        "compute_epoch": timing.Spread.of([1.0]),
        "serial_epoch": timing.Spread.of([1.48]),
    }


def graded(monkeypatch, candidate_seconds, baseline_seconds=BASELINE_SECONDS):
    monkeypatch.setattr(timing, "Clock", scripted_clock(candidate_seconds, baseline_seconds))
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
    assert metrics["target_speedup"] == pytest.approx(10.5 / target_time(), abs=1e-4)
    assert metrics["speedup"] == pytest.approx(10.5 / 8.0, abs=1e-4)
    assert metrics["overlap"] == pytest.approx((SERIAL - 8.0) / (SERIAL - BEST), abs=1e-4)
    assert metrics["best_time"] == pytest.approx(7.02)
    assert metrics["serial_time"] == pytest.approx(SERIAL)
    assert metrics["zero_speedup"] == pytest.approx(10.5 / SERIAL, abs=1e-4)
    assert metrics["baseline_times"] == [10.5] * 3 and metrics["candidate_times"] == [8.0] * 3


def test_hiding_too_little_is_too_slow_with_the_target_in_the_message(monkeypatch):
    result = graded(monkeypatch, 10.0)
    assert result["verdict"] == "too_slow"
    assert "1.05x faster" in result["message"] and "1.21x" in result["message"]


def test_faster_than_the_bound_is_implausible(monkeypatch):
    result = graded(monkeypatch, 5.0)
    assert result["verdict"] == "wrong"
    assert check(result, "plausible")["status"] == "fail"
    assert "above the best possible 1.50x" in check(result, "plausible")["message"]


def test_within_the_noise_margin_above_the_bound_is_still_plausible(monkeypatch):
    result = graded(monkeypatch, 6.8)  # 1.54x: above 1.50x, below 1.50 x 1.15
    assert check(result, "plausible")["status"] == "pass"
    assert result["verdict"] == "accepted"


def test_a_starter_that_waits_on_the_host_does_not_lower_the_bar_for_overlap(monkeypatch):
    # The starter waits for every copy: 2 s an epoch, 14 s in all. Removing the waits
    # alone (copies and compute still taking turns on the device) gives the serial
    # 10.36 s: 1.35x, which counted from the starter would hide two thirds of the
    # hideable time; counted from the serial time it hides nothing.
    slow = 14.0
    result = graded(monkeypatch, SERIAL, baseline_seconds=slow)
    metrics = result["metrics"]
    assert result["verdict"] == "too_slow", result["message"]
    assert metrics["zero_speedup"] == pytest.approx(slow / SERIAL, abs=1e-4)
    assert metrics["overlap"] == pytest.approx(0.0, abs=1e-4)
    assert metrics["target_speedup"] == pytest.approx(slow / target_time(), abs=1e-4)
    assert timing.target_for(metrics["bound_speedup"], 0.5) < metrics["speedup"]
    assert "only the host's waits removed, gives about 1.35x" in result["message"]

    # Overlapping the copies with the compute is what reaches the target.
    result = graded(monkeypatch, 8.0, baseline_seconds=slow)
    assert result["verdict"] == "accepted", result["message"]
    assert result["metrics"]["overlap"] == pytest.approx((SERIAL - 8.0) / (SERIAL - BEST), 1e-3)


def test_an_exercise_without_a_serial_time_counts_overlap_from_the_baseline(monkeypatch):
    exercise = dataclasses.replace(load(SLUG), serial_time=None)
    monkeypatch.setattr(timing, "Clock", scripted_clock(8.0, 10.5))
    monkeypatch.setattr(grading._Harness, "components", scripted_components)
    metrics = grading.grade(exercise, exercise.starter, device="cpu", trials=3)["metrics"]
    assert metrics["zero_speedup"] == 1.0 and metrics["serial_time"] is None
    assert metrics["target_speedup"] == pytest.approx(timing.target_for(10.5 / 7.02, 0.5), 1e-4)
