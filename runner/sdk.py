"""What an exercise's grader needs, in one import: ``from runner.sdk import ...``.

The declarations (``Exercise``, ``Scenario``), the result type (``Check``) and the checks
several exercises share, so graders call them instead of keeping copies. Every check
here reads the trusted record of a run (its trace, the kit's own records), never
anything the candidate's process said.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import field

import torch

from runner.contract import Check
from runner.exercise import Exercise, Scenario
from runner.sim.trace import Span

__all__ = [
    "Check",
    "Exercise",
    "Scenario",
    "block_on",
    "busy_on",
    "most_at_once",
    "one_at_a_time",
    "same_values",
    "secret",
]

SECRET = "overlap_secret"  # a config field's metadata key: never sent to the trainer


def secret(default):
    """A config field the trainer must not know (the seed of a hidden schedule): the
    grader uses it, the candidate's ``cluster.config`` does not have it.

    ``seed: int = secret(5)`` in a ``@dataclass`` config."""
    return field(default=default, metadata={SECRET: True})


def one_at_a_time(run, lanes: Iterable[str], op: str, name: str, *, what: str) -> Check:
    """Each lane runs one ``op`` at a time (a worker computes one batch at a time).

    ``what`` completes the sentence: "worker 2 computed b03 and b07 at the same time; ..."."""
    for lane in lanes:
        pair: tuple[Span, Span] | None = run.trace.first_overlap(
            run.trace.select(lane=lane, op=op)
        )
        if pair:
            return Check.fail(
                name,
                f"{lane} ran {op} for {pair[0].batch} and {pair[1].batch} at the same time; "
                + what,
            )
    return Check.ok(name, f"Every {op} ran alone on its lane.")


def most_at_once(intervals: Iterable[tuple[int, int]]) -> tuple[int, int]:
    """(the most ``(start, end)`` tick intervals open at once, the tick it began).

    For limits on things that are not one span each: a checkpoint in flight from its copy
    to the end of its write, a batch held from its load until the model took it. An
    interval that ends as another starts does not overlap it."""
    edges = []
    for start, end in intervals:
        if end > start:
            edges += [(start, 1), (end, -1)]
    edges.sort()  # at the same tick, ends (-1) come before starts
    peak, at, running = 0, 0, 0
    for tick, delta in edges:
        running += delta
        if running > peak:
            peak, at = running, tick
    return peak, at


async def busy_on(sim, lanes: Iterable[str], op: str, seconds: float,
                  batch: str | None = None) -> None:
    """An ``_async`` kit operation that occupies several lanes at once for one cost (a
    message on the sender's outgoing and the receiver's incoming side of a link): one span
    on each lane, all with the same start and end, marked cancelled if it is cut short.
    ``Sim.busy`` is the one-lane form."""
    spans = [sim.open_span(lane, op, batch) for lane in lanes]
    try:
        await sim.wait(seconds)
    except asyncio.CancelledError:
        for span in spans:
            sim.close_span(span, cancelled=True)
        raise
    for span in spans:
        sim.close_span(span)


def block_on(sim, lanes: Iterable[str], op: str, seconds: float, batch: str | None = None,
             *, call: str) -> None:
    """The blocking twin of :func:`busy_on` (``Sim.block`` on several lanes): the clock
    moves, nothing else runs, and a call from async code counts in ``blocking_calls``
    under ``call`` ("NetLink.send")."""
    if sim.caller_in_async:
        sim.blocking_calls[call] += 1
    spans = [sim.open_span(lane, op, batch, blocking=True) for lane in lanes]
    sim.loop.advance_ticks(sim.cost_ticks(seconds))
    for span in spans:
        sim.close_span(span)


def same_values(name: str, got, expected, *, ok: str, fail: str) -> Check:
    """Tensors equal to within float64 rounding; ``fail`` may use ``{diff}``."""
    if not isinstance(got, torch.Tensor) or got.shape != expected.shape:
        return Check.fail(name, fail.format(diff="n/a"))
    if torch.allclose(got, expected, rtol=1e-9, atol=1e-12):
        return Check.ok(name, ok)
    return Check.fail(name, fail.format(diff=f"{float((got - expected).abs().max()):.3g}"))
