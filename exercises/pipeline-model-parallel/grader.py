"""Grader: pipelined model-parallel training.

Checks (each on every run, plain and shuffled; three scenarios: m=8, m=2 < p, m=1):
- gradients           every stage's accumulated gradient equals the unpipelined run's
- each_op_once        every (micro-batch, stage, forward/backward) ran exactly once, and
                      every activation and gradient crossed its link
- dependencies        forward of stage k+1 after forward of stage k; backward in reverse
- one_op_per_stage    a node runs one operation at a time
- in_flight           at most max_in_flight micro-batches between first forward and last backward
- activations_freed   stored activations never exceed the depth and drop back to zero
- link_causality      every stage's input is what its link delivered: the previous stage's
                      activation (forward) or the next stage's gradient (backward) of the same
                      micro-batch, after its send finished — never a tensor that skipped or
                      outran its link
(+ clean_shutdown, plausible, blocking_calls, threads from the framework; a deadlock
in any scenario is a timeout)
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from runner.exercise import Exercise, Scenario
from runner.result import Check
from runner.sim import Cluster, Link, MicroBatch, Stage
from runner.sim.trace import Span


@dataclass(frozen=True)
class Config:
    num_stages: int = 4
    num_microbatches: int = 8
    max_in_flight: int = 4
    width: int = 4
    microbatch_size: int = 2
    # simulated costs, in seconds
    forward_cost: float = 0.10
    backward_cost: float = 0.20
    send_cost: float = 0.02


def build(sim, config: Config) -> Cluster:
    generator = torch.Generator().manual_seed(3)
    d, b = config.width, config.microbatch_size

    def randn(*shape, scale=1.0):
        return scale * torch.randn(*shape, generator=generator, dtype=torch.float64)

    stages = [
        Stage(sim, k, randn(d, d, scale=0.8), config.forward_cost, config.backward_cost)
        for k in range(config.num_stages)
    ]
    links = [Link(sim, k, k + 1, config.send_cost) for k in range(config.num_stages - 1)]
    microbatches = [
        MicroBatch(i, randn(b, d), torch.tanh(randn(b, d)), sim)
        for i in range(config.num_microbatches)
    ]
    lanes = []
    for k in range(config.num_stages):
        lanes.append(f"stage {k}")
        if k < config.num_stages - 1:
            lanes.append(f"link {k}-{k + 1}")
    sim.trace.declare_lanes(lanes)
    return Cluster(config=config, stages=stages, links=links, microbatches=microbatches)


# -- checks -------------------------------------------------------------------


def _ops(run) -> dict[tuple[int, int, str], list]:
    """(micro-batch, stage, op) -> spans."""
    ops: dict[tuple[int, int, str], list] = {}
    for stage in run.cluster.stages:
        for span in run.trace.select(lane=stage.lane):
            if span.batch and span.batch.startswith("mb"):
                ops.setdefault((int(span.batch[2:]), stage.index, span.op), []).append(span)
    return ops


def check(run, baseline) -> list[Check]:
    config: Config = run.cluster.config
    p, m = config.num_stages, config.num_microbatches
    checks = []

    # gradients
    worst, where = 0.0, None
    for stage, base_stage in zip(run.cluster.stages, baseline.cluster.stages, strict=True):
        got, expected = stage.gradient, base_stage.gradient
        if not torch.allclose(got, expected, rtol=1e-9, atol=1e-12):
            diff = float((got - expected).abs().max())
            if where is None or diff > worst:
                worst, where = diff, stage.index
    checks.append(
        Check.verdict(
            "gradients",
            where is None,
            "Every stage's gradient equals the unpipelined run's.",
            f"Stage {where}'s accumulated gradient differs from the unpipelined run's "
            f"(largest difference {worst:.3g}).",
        )
    )

    # each_op_once
    ops = _ops(run)
    problem = None
    for mb in range(m):
        for k in range(p):
            for op in ("forward", "backward"):
                count = len(ops.get((mb, k, op), []))
                if count != 1:
                    problem = f"The {op} of micro-batch {mb} on stage {k} ran {count} times."
                    break
            if problem:
                break
        if problem:
            break
    if problem is None:
        for link in run.cluster.links:
            sends = sum(1 for _ in run.trace.select(lane=link.lane, op="send"))
            if sends < 2 * m:
                problem = (
                    f"{link.lane} carried {sends} tensors; every activation and gradient must "
                    f"cross it ({2 * m} in all)."
                )
                break
    checks.append(
        Check.verdict(
            "each_op_once",
            problem is None,
            "Every forward and backward ran exactly once; every tensor crossed its link.",
            problem or "",
        )
    )

    # dependencies
    problem = None
    if checks[-1].status == "pass":
        for mb in range(m):
            chain = [ops[(mb, k, "forward")][0] for k in range(p)]
            chain += [ops[(mb, k, "backward")][0] for k in reversed(range(p))]
            names = [f"forward on stage {k}" for k in range(p)]
            names += [f"backward on stage {k}" for k in reversed(range(p))]
            for i in range(1, len(chain)):
                if chain[i].start < chain[i - 1].end:
                    problem = (
                        f"Micro-batch {mb}: the {names[i]} started before the {names[i - 1]} "
                        "had finished."
                    )
                    break
            if problem:
                break
    checks.append(
        Check.verdict(
            "dependencies",
            problem is None,
            "Forwards ran stage by stage, backwards in reverse.",
            problem or "",
        )
    )

    # one_op_per_stage
    problem = None
    for stage in run.cluster.stages:
        pair = run.trace.first_overlap(run.trace.select(lane=stage.lane))
        if pair:
            a, b = pair
            problem = (
                f"Stage {stage.index} ran the {a.op} of {a.batch} and the {b.op} of {b.batch} "
                "at the same time; a node runs one operation at a time."
            )
            break
    checks.append(
        Check.verdict(
            "one_op_per_stage",
            problem is None,
            "Every node ran one operation at a time.",
            problem or "",
        )
    )

    # in_flight
    spans = []
    for mb in range(m):
        first = ops.get((mb, 0, "forward"))
        last = ops.get((mb, 0, "backward"))
        if first and last:
            spans.append(Span("in flight", "", first[0].start, last[-1].end))
    peak, at = run.trace.max_concurrency(spans)
    checks.append(
        Check.verdict(
            "in_flight",
            peak <= config.max_in_flight,
            f"At most {peak} micro-batches in flight (limit {config.max_in_flight}).",
            f"{peak} micro-batches were in flight at t={at / 1e6:.3f} s; the limit is "
            f"{config.max_in_flight}.",
        )
    )

    # activations_freed
    problem = None
    for stage in run.cluster.stages:
        if stage.stored_activations:
            problem = f"Stage {stage.index} still holds {stage.stored_activations} activations."
            break
        if stage.peak_stored > config.max_in_flight:
            problem = (
                f"Stage {stage.index} held {stage.peak_stored} activations at once "
                f"(the memory allows {config.max_in_flight})."
            )
            break
    checks.append(
        Check.verdict(
            "activations_freed",
            problem is None,
            "Stored activations stayed within the depth and dropped back to zero.",
            problem or "",
        )
    )
    checks.append(_link_causality(run.cluster.stages))
    return checks


def _expected_origin(op: str, k: int, p: int, mb: int) -> tuple[tuple, str]:
    """What stage k's input for ``op`` of ``mb`` must be, and how to say it."""
    if op == "forward":
        if k == 0:
            return ("input", mb), f"micro-batch {mb}'s inputs"
        return ("send", (k - 1, k), mb, ("forward", k - 1, mb)), (
            f"stage {k - 1}'s activation of micro-batch {mb}, delivered by link {k - 1}-{k}"
        )
    if k == p - 1:
        return ("loss", mb, ("forward", k, mb)), (
            f"the loss gradient of stage {k}'s output for micro-batch {mb}"
        )
    return ("send", (k, k + 1), mb, ("backward", k + 1, mb)), (
        f"stage {k + 1}'s gradient of micro-batch {mb}, delivered by link {k}-{k + 1}"
    )


def _link_causality(stages) -> Check:
    p = len(stages)
    for stage in stages:
        for op, mb, origin, _tick in stage.consumed:
            expected, said = _expected_origin(op, stage.index, p, mb)
            if expected[0] == "send":  # (which micro-batch the send was labelled with is free)
                ok = bool(origin) and origin[:2] == expected[:2] and bool(origin[3]) and (
                    origin[3][:3] == expected[3]
                )
            else:
                ok = bool(origin) and origin[: len(expected)] == expected
            if not ok:
                return Check.fail(
                    "link_causality",
                    f"The {op} of micro-batch {mb} on stage {stage.index} did not use "
                    f"{said}: a tensor must cross its link (and arrive) before the next "
                    "stage uses it.",
                )
    return Check.ok(
        "link_causality", "Every stage used what its link delivered, after it arrived."
    )


def bound(baseline) -> float:
    """Lower bound on a pipelined makespan: the last stage cannot start before the
    first activation reaches it, then does all its work, then the last gradient
    travels back through every stage."""
    c: Config = baseline.cluster.config
    p, m = c.num_stages, c.num_microbatches
    fill = (p - 1) * (c.forward_cost + c.send_cost)
    work = m * (c.forward_cost + c.backward_cost)
    drain = (p - 1) * (c.backward_cost + c.send_cost)
    return baseline.makespan / (fill + work + drain)


EXERCISE = Exercise(
    build=build,
    check=check,
    scenarios=[
        Scenario("main", Config(), timed=True, seeds=4),
        Scenario("fewer_microbatches_than_stages", Config(num_microbatches=2)),
        Scenario("single_microbatch", Config(num_microbatches=1), seeds=2),
    ],
    target_speedup=2.4,
    bound=bound,
    bound_note=(
        "fill + last stage's work + drain; the classic m*p/(m+p-1) = 2.91 for m=8, p=4 "
        "ignores communication"
    ),
    work_ops=("forward", "backward"),
)
