"""Timing on a real device, done by the harness and never by the candidate's code.

A comparison runs the baseline (A) and the candidate (B) the same way:

1. warm-ups, untimed, in the order A B (kernels loaded, cuBLAS handles made, the caching
   allocator filled);
2. trials interleaved A B A B ..., so drift of the machine (clocks, temperature, other
   tenants) touches both sides alike;
3. each trial timed between two synchronisations of the whole device: CUDA events on a
   GPU, ``time.perf_counter`` on a CPU (where a synchronisation is a no-op);
4. the speedup is the median of the paired ratios A_i / B_i, reported with its
   quartiles and extremes.

Preparing a trial (building a fresh model, executing the candidate's module) happens in
``prepare``, outside the timed region; checking what the trial returned happens in
``after``, also outside it. Nothing here knows about exercises.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

BASELINE, CANDIDATE = "baseline", "candidate"
WARMUP, TRIAL = "warmup", "trial"


@dataclass(frozen=True)
class Spread:
    """A sample summarised: median, quartiles (inclusive method) and extremes."""

    median: float
    q1: float
    q3: float
    low: float
    high: float
    n: int

    @classmethod
    def of(cls, values: list[float]) -> Spread:
        if not values:
            raise ValueError("no values to summarise")
        ordered = sorted(values)
        if len(ordered) == 1:
            q1 = median = q3 = ordered[0]
        else:
            q1, median, q3 = statistics.quantiles(ordered, n=4, method="inclusive")
        return cls(median, q1, q3, ordered[0], ordered[-1], len(ordered))

    @property
    def relative_iqr(self) -> float:
        """The interquartile range as a fraction of the median."""
        return (self.q3 - self.q1) / self.median if self.median else float("inf")

    def to_json(self, digits: int = 6) -> dict:
        return {
            "median": round(self.median, digits),
            "q1": round(self.q1, digits),
            "q3": round(self.q3, digits),
            "min": round(self.low, digits),
            "max": round(self.high, digits),
            "n": self.n,
        }


class Clock:
    """Times one call between two synchronisations of the whole device.

    On CUDA the interval is measured with CUDA events recorded after a device-wide
    synchronisation, so work the call left running on *any* stream is counted (an event
    on the current stream alone would miss a side stream still busy). On a CPU the
    operations are synchronous and ``perf_counter`` is the clock.
    """

    def __init__(self, device) -> None:
        import torch

        self._torch = torch
        self.device = torch.device(device)
        self.cuda = self.device.type == "cuda"
        self.kind = "cuda_events" if self.cuda else "perf_counter"

    def synchronize(self) -> None:
        if self.cuda:
            self._torch.cuda.synchronize(self.device)

    def time(self, fn: Callable[[], Any]) -> tuple[float, Any]:
        """(seconds, what fn returned)."""
        if not self.cuda:
            start = time.perf_counter()
            value = fn()
            return time.perf_counter() - start, value
        cuda = self._torch.cuda
        cuda.synchronize(self.device)
        begin = cuda.Event(enable_timing=True)
        end = cuda.Event(enable_timing=True)
        begin.record()
        value = fn()
        cuda.synchronize(self.device)  # every stream, not only the one the events use
        end.record()
        end.synchronize()
        return begin.elapsed_time(end) / 1000.0, value


@dataclass
class Comparison:
    """Timed trials of a baseline and a candidate, in the order they ran."""

    baseline: list[float] = field(default_factory=list)
    candidate: list[float] = field(default_factory=list)
    order: list[str] = field(default_factory=list)  # "warmup:baseline", "trial:candidate", ...
    clock: str = ""

    @property
    def ratios(self) -> list[float]:
        """Baseline time / candidate time, trial by trial (each B paired with its A)."""
        pairs = zip(self.baseline, self.candidate, strict=False)  # only complete pairs
        return [a / b if b > 0 else float("inf") for a, b in pairs]

    @property
    def speedup(self) -> Spread:
        return Spread.of(self.ratios)

    @property
    def baseline_spread(self) -> Spread:
        return Spread.of(self.baseline)

    @property
    def candidate_spread(self) -> Spread:
        return Spread.of(self.candidate)


# prepare(phase, index) -> a zero-argument callable: the part that is timed
Prepare = Callable[[str, int], Callable[[], Any]]
# after(label, phase, index, value): looks at what a run returned, outside the timing
After = Callable[[str, str, int, Any], None]


def compare(
    baseline: Prepare,
    candidate: Prepare,
    *,
    clock: Clock,
    trials: int,
    warmups: int = 1,
    after: After | None = None,
) -> Comparison:
    """Warm-ups A B (untimed), then ``trials`` timed pairs A B A B ... (see the module doc).

    An exception from a run or from ``after`` ends the comparison (it propagates).
    """
    if trials < 1:
        raise ValueError("at least one trial is needed")
    result = Comparison(clock=clock.kind)
    sides = ((BASELINE, baseline, result.baseline), (CANDIDATE, candidate, result.candidate))
    for index in range(warmups):
        for label, prepare, _ in sides:
            value = prepare(WARMUP, index)()
            result.order.append(f"{WARMUP}:{label}")
            if after is not None:
                after(label, WARMUP, index, value)
    for index in range(trials):
        for label, prepare, times in sides:
            run = prepare(TRIAL, index)
            seconds, value = clock.time(run)
            times.append(seconds)
            result.order.append(f"{TRIAL}:{label}")
            if after is not None:
                after(label, TRIAL, index, value)
    return result


def time_component(
    prepare: Callable[[int], Callable[[], Any]], *, clock: Clock, trials: int, warmups: int = 1
) -> Spread:
    """The spread of one piece of work timed alone (warm-ups first, then ``trials``)."""
    for index in range(warmups):
        prepare(index)()
    return Spread.of([clock.time(prepare(warmups + i))[0] for i in range(trials)])


# -- what the numbers mean -------------------------------------------------------


def bound_speedup(baseline_seconds: float, best_seconds: float) -> float:
    """The best speedup any correct program can reach: baseline / shortest possible time."""
    return baseline_seconds / best_seconds if best_seconds > 0 else float("inf")


def overlap_fraction(speedup: float, bound: float, zero: float = 1.0) -> float | None:
    """How much of the time that overlap can hide was hidden: 0 = none (the time of the
    zero point, speedup ``zero``), 1 = all of it (the bound). The zero point is the
    baseline (``zero`` 1.0) or the same work with no overlap and no host waits either
    (``zero`` = baseline / that time): removing waits is not overlap. None when nothing
    can be hidden (bound <= zero)."""
    zero = max(1.0, zero)
    if bound <= zero or speedup <= 0:
        return None
    return (1 / zero - 1 / speedup) / (1 / zero - 1 / bound)


def target_for(bound: float, fraction: float, zero: float = 1.0) -> float:
    """The speedup that hides ``fraction`` of the hideable time (the inverse of
    ``overlap_fraction``)."""
    zero = max(1.0, zero)
    if bound <= zero:
        return zero
    return 1 / (1 / zero - fraction * (1 / zero - 1 / bound))


def implausible_speedup(speedup: float, bound: float, margin: float) -> str | None:
    """Why a speedup cannot be real, or None. ``margin`` allows for measurement noise:
    the bound comes from medians of separately timed components."""
    if speedup > bound * (1 + margin):
        return (
            f"The measured speedup {speedup:.2f}x is above the best possible {bound:.2f}x "
            f"(plus a {margin:.0%} allowance for measurement noise): some work was skipped "
            "or the timing was tampered with, so the result cannot be trusted."
        )
    return None


def less_work(done: dict[str, int], required: dict[str, int]) -> str | None:
    """Why a run did less work than the baseline (counted by the harness), or None."""
    for name, needed in required.items():
        got = done.get(name, 0)
        if got < needed:
            return f"The run made {got} {name} through the harness; the baseline needs {needed}."
    return None
