"""The GPU timing harness: statistics, the A B A B order, the bound and plausibility.

A fake clock hands out scripted durations, so the numbers are exact; the real clock is
only exercised on CPU tensors (it must time the call and return its value).
"""

import pytest
import torch

from runner.gpu import timing
from runner.gpu.timing import Clock, Spread, compare


class ScriptedClock:
    """Runs the call and reports the next scripted duration; logs what it timed."""

    kind = "scripted"

    def __init__(self, durations):
        self.durations = list(durations)
        self.timed = []

    def synchronize(self):
        pass

    def time(self, fn):
        value = fn()
        self.timed.append(value)
        return self.durations.pop(0), value


def sides(log):
    def side(label):
        def prepare(phase, index):
            log.append(f"prepare {phase}:{label}:{index}")
            return lambda: f"{phase}:{label}:{index}"

        return prepare

    return side("baseline"), side("candidate")


def test_spread_reports_median_quartiles_and_extremes():
    spread = Spread.of([4.0, 1.0, 3.0, 2.0, 5.0])
    assert (spread.median, spread.q1, spread.q3, spread.low, spread.high) == (3, 2, 4, 1, 5)
    assert spread.n == 5
    assert spread.relative_iqr == pytest.approx(2 / 3)
    assert Spread.of([7.0]).to_json()["median"] == 7.0


def test_spread_of_nothing_is_an_error():
    with pytest.raises(ValueError):
        Spread.of([])


def test_warmups_come_first_then_baseline_and_candidate_alternate():
    log = []
    baseline, candidate = sides(log)
    clock = ScriptedClock([1.0] * 6)
    result = compare(baseline, candidate, clock=clock, trials=3, warmups=1)
    assert result.order == [
        "warmup:baseline",
        "warmup:candidate",
        *["trial:baseline", "trial:candidate"] * 3,
    ]
    # warm-ups are never timed; every trial is, in the A B A B order
    assert clock.timed == [
        "trial:baseline:0",
        "trial:candidate:0",
        "trial:baseline:1",
        "trial:candidate:1",
        "trial:baseline:2",
        "trial:candidate:2",
    ]


def test_preparing_and_checking_happen_outside_the_timed_call():
    events = []

    class LoggingClock(ScriptedClock):
        def time(self, fn):
            events.append("start timing")
            result = super().time(fn)
            events.append("stop timing")
            return result

    def prepare(phase, index):
        events.append(f"prepare {phase}")
        return lambda: events.append("run") or "value"

    def after(label, phase, index, value):
        events.append(f"after {phase} {label}")

    compare(prepare, prepare, clock=LoggingClock([1.0, 1.0]), trials=1, warmups=0, after=after)
    assert events == [
        "prepare trial",
        "start timing",
        "run",
        "stop timing",
        "after trial baseline",
        "prepare trial",
        "start timing",
        "run",
        "stop timing",
        "after trial candidate",
    ]


def test_the_speedup_is_the_median_of_paired_ratios():
    baseline, candidate = sides([])
    # trial i: baseline, candidate -> ratios 2.0, 3.0, 2.5, 1.0, 2.2
    durations = [10, 5, 12, 4, 10, 4, 9, 9, 11, 5]
    result = compare(baseline, candidate, clock=ScriptedClock(durations), trials=5, warmups=0)
    assert result.baseline == [10, 12, 10, 9, 11]
    assert result.candidate == [5, 4, 4, 9, 5]
    assert result.ratios == pytest.approx([2.0, 3.0, 2.5, 1.0, 2.2])
    assert result.speedup.median == pytest.approx(2.2)
    assert (result.speedup.low, result.speedup.high) == (pytest.approx(1.0), pytest.approx(3.0))
    assert result.baseline_spread.median == 10


def test_a_failing_check_ends_the_comparison():
    baseline, candidate = sides([])

    def after(label, phase, index, value):
        if label == "candidate" and phase == "trial" and index == 1:
            raise RuntimeError("trial 1 was wrong")

    clock = ScriptedClock([1.0] * 10)
    with pytest.raises(RuntimeError, match="trial 1"):
        compare(baseline, candidate, clock=clock, trials=5, warmups=0, after=after)
    assert len(clock.timed) == 4


def test_components_are_warmed_up_then_timed_alone():
    calls = []

    def prepare(index):
        return lambda: calls.append(index)

    clock = ScriptedClock([3.0, 1.0, 2.0])
    spread = timing.time_component(prepare, clock=clock, trials=3, warmups=2)
    assert calls == [0, 1, 2, 3, 4]  # two warm-ups, then the three timed calls
    assert spread.median == 2.0


def test_the_cpu_clock_times_the_call_and_returns_its_value():
    clock = Clock("cpu")
    x = torch.randn(64, 64)
    seconds, value = clock.time(lambda: (x @ x).sum())
    assert clock.kind == "perf_counter"
    assert seconds > 0
    assert torch.equal(value, (x @ x).sum())


def test_target_and_overlap_are_inverse_views_of_the_same_number():
    bound = 1.6
    target = timing.target_for(bound, 0.5)
    assert timing.overlap_fraction(target, bound) == pytest.approx(0.5)
    assert timing.overlap_fraction(1.0, bound) == pytest.approx(0.0)  # the baseline
    assert timing.overlap_fraction(bound, bound) == pytest.approx(1.0)  # the best
    assert timing.overlap_fraction(1.2, 1.0) is None  # nothing to hide


def test_with_a_zero_point_removing_waits_alone_counts_as_no_overlap():
    # The baseline takes 14 s; the same work with no host waits and no overlap 10 s
    # (zero point 1.4x); the best possible 7 s (bound 2x).
    zero, bound = 14 / 10, 14 / 7
    assert timing.overlap_fraction(zero, bound, zero) == pytest.approx(0.0)
    assert timing.overlap_fraction(bound, bound, zero) == pytest.approx(1.0)
    target = timing.target_for(bound, 0.5, zero)
    assert target == pytest.approx(14 / 8.5)  # half of the 3 s overlap can hide
    assert timing.overlap_fraction(target, bound, zero) == pytest.approx(0.5)
    # Without the zero point, the same speedup would count as two thirds overlapped.
    assert timing.overlap_fraction(zero, bound) == pytest.approx(4 / 7)
    assert timing.target_for(bound, 0.5) < zero
    # A zero point slower than the baseline is the baseline; one at the bound leaves
    # nothing to hide.
    assert timing.target_for(bound, 0.5, 0.9) == timing.target_for(bound, 0.5)
    assert timing.target_for(bound, 0.5, bound) == bound
    assert timing.overlap_fraction(1.9, bound, bound) is None


def test_a_speedup_above_the_bound_beyond_the_noise_margin_is_implausible():
    assert timing.implausible_speedup(1.7, 1.5, margin=0.15) is None
    reason = timing.implausible_speedup(2.0, 1.5, margin=0.15)
    assert "above the best possible 1.50x" in reason


def test_doing_less_work_than_the_baseline_is_reported():
    required = {"optimizer steps": 28, "validation passes": 7}
    assert timing.less_work({"optimizer steps": 32, "validation passes": 8}, required) is None
    reason = timing.less_work({"optimizer steps": 12, "validation passes": 7}, required)
    assert reason == "The run made 12 optimizer steps through the harness; the baseline needs 28."
