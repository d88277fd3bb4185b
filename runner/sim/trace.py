"""What ran when: the trace a simulation records, and the questions checks ask of it.

Every simulated operation is one :class:`Span` on a *lane* (``worker 2``,
``stage 1``, ``validator``, ``server``...). Times are integer ticks of the virtual
clock (1 tick = 1 µs), so comparisons are exact.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from runner.sim.clock import to_seconds


@dataclass(slots=True)
class Span:
    lane: str
    op: str
    start: int
    end: int | None = None  # None while running
    batch: str | None = None
    blocking: bool = False  # called through the blocking API: nothing else ran meanwhile
    cancelled: bool = False

    def overlaps(self, other: Span) -> bool:
        return self.start < _end(other) and other.start < _end(self)

    def to_json(self) -> dict:
        data = {
            "lane": self.lane,
            "op": self.op,
            "start": to_seconds(self.start),
            "end": to_seconds(_end(self)),
            "batch": self.batch,
        }
        if self.blocking:
            data["blocking"] = True
        if self.cancelled:
            data["cancelled"] = True
        return data


def _end(span: Span) -> int:
    return span.start if span.end is None else span.end


class Trace:
    def __init__(self) -> None:
        self.spans: list[Span] = []
        self._lanes: list[str] = []

    def declare_lanes(self, lanes: Iterable[str]) -> None:
        """Fix the order lanes are drawn in (top to bottom)."""
        for lane in lanes:
            if lane not in self._lanes:
                self._lanes.append(lane)

    def open(self, lane: str, op: str, start: int, batch: str | None, blocking: bool) -> Span:
        span = Span(lane, op, start, None, batch, blocking)
        self.spans.append(span)
        if lane not in self._lanes:
            self._lanes.append(lane)
        return span

    def select(self, *, lane: str | None = None, op: str | None = None) -> Iterator[Span]:
        for span in self.spans:
            if (lane is None or span.lane == lane) and (op is None or span.op == op):
                yield span

    def lanes(self) -> list[str]:
        return list(self._lanes)

    def busy_ticks(self, *, op: str | None = None) -> int:
        return sum(_end(s) - s.start for s in self.spans if op is None or s.op == op)

    def first_overlap(self, spans: Iterable[Span]) -> tuple[Span, Span] | None:
        """The first two spans (by start) that run at the same time, if any."""
        ordered = sorted(spans, key=lambda s: (s.start, _end(s)))
        latest: Span | None = None
        for span in ordered:
            if latest is not None and span.start < _end(latest):
                return latest, span
            if latest is None or _end(span) > _end(latest):
                latest = span
        return None

    def blocked_ticks(self, start: int, end: int) -> int:
        """How much of [start, end) the whole program spent in blocking calls."""
        intervals = sorted(
            (max(s.start, start), min(_end(s), end))
            for s in self.spans
            if s.blocking and s.start < end and _end(s) > start
        )
        total, covered_to = 0, start
        for a, b in intervals:
            a = max(a, covered_to)
            if b > a:
                total += b - a
                covered_to = b
        return total

    def max_concurrency(self, spans: Iterable[Span]) -> tuple[int, int]:
        """(peak number of spans running at once, tick when the peak starts)."""
        edges: list[tuple[int, int]] = []
        for s in spans:
            if _end(s) > s.start:
                edges.append((s.start, 1))
                edges.append((_end(s), -1))
        edges.sort(key=lambda e: (e[0], e[1]))  # ends before starts at the same tick
        peak, at, running = 0, 0, 0
        for tick, delta in edges:
            running += delta
            if running > peak:
                peak, at = running, tick
        return peak, at

    def to_json(self, limit: int) -> dict:
        spans = sorted(self.spans, key=lambda s: (s.start, self._lane_index(s.lane)))
        return {
            "lanes": self.lanes(),
            "spans": [s.to_json() for s in spans[:limit]],
            "truncated": max(0, len(spans) - limit),
        }

    def _lane_index(self, lane: str) -> int:
        try:
            return self._lanes.index(lane)
        except ValueError:
            return len(self._lanes)
