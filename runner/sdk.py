"""What an exercise's grader needs, in one import: ``from runner.sdk import ...``.

The declarations (``Exercise``, ``Scenario``), the result type (``Check``) and the checks
several exercises share, so graders call them instead of keeping copies. Every check
here reads the trusted record of a run (its trace, the kit's own records), never
anything the candidate's process said.
"""

from __future__ import annotations

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


def same_values(name: str, got, expected, *, ok: str, fail: str) -> Check:
    """Tensors equal to within float64 rounding; ``fail`` may use ``{diff}``."""
    if not isinstance(got, torch.Tensor) or got.shape != expected.shape:
        return Check.fail(name, fail.format(diff="n/a"))
    if torch.allclose(got, expected, rtol=1e-9, atol=1e-12):
        return Check.ok(name, ok)
    return Check.fail(name, fail.format(diff=f"{float((got - expected).abs().max()):.3g}"))
