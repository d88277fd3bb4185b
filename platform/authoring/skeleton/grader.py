"""Grader of a new exercise (a small working example to start from: replace it).

Checks (each on every run, plain and shuffled):
- gradients   train() returns one gradient per batch, in batch order, equal to the
              baseline's
- in_flight   a worker computes one batch at a time
(+ clean_shutdown, plausible, blocking_calls, threads from the framework)

See "The code side of an exercise" in exercises/README.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from runner.exercise import Exercise, Scenario
from runner.result import Check
from runner.sim import Batch, Cluster, Model, Worker

DIM = 4


@dataclass(frozen=True)
class Config:
    num_workers: int = 2
    num_batches: int = 4
    compute_cost: float = 0.10  # simulated seconds


def build(sim, config: Config) -> Cluster:
    generator = torch.Generator().manual_seed(3)
    batches = [
        Batch(
            f"b{i}",
            torch.randn(4, DIM, generator=generator, dtype=torch.float64),
            torch.randn(4, generator=generator, dtype=torch.float64),
        )
        for i in range(config.num_batches)
    ]
    sim.trace.declare_lanes([f"worker {i}" for i in range(config.num_workers)])
    return Cluster(
        config=config,
        batches=batches,
        workers=[Worker(sim, i, config.compute_cost) for i in range(config.num_workers)],
        model=Model(sim, torch.zeros(DIM, dtype=torch.float64), lr=0.1, step_cost=0.01,
                    snapshot_cost=0.01),
    )


def check(run, baseline) -> list[Check]:
    returned = run.returned if isinstance(run.returned, list | tuple) else None
    expected = baseline.returned
    order = [b.id for b in run.cluster.batches]
    if returned is None:
        ok, problem = False, f"train() returned {type(run.returned).__name__}, not a list."
    elif [getattr(g, "batch", None) for g in returned] != order:
        got = [getattr(g, "batch", None) for g in returned]
        ok, problem = False, f"train() returned gradients for {got}; expected {order}."
    else:
        ok = all(
            torch.allclose(g.values, e.values, rtol=1e-9, atol=1e-12)
            for g, e in zip(returned, expected, strict=True)
        )
        problem = "" if ok else "A gradient differs from the baseline's."
    checks = [Check.verdict("gradients", ok, "One gradient per batch, in order.", problem)]

    problem = ""
    for worker in run.cluster.workers:
        pair = run.trace.first_overlap(run.trace.select(lane=worker.lane, op="compute"))
        if pair:
            problem = (f"{worker.lane} computed {pair[0].batch} and {pair[1].batch} at the "
                       "same time; a worker computes one batch at a time.")
            break
    checks.append(Check.verdict("in_flight", not problem, "One batch per worker at a time.",
                                problem))
    return checks


def bound(baseline) -> float:
    config: Config = baseline.cluster.config
    rounds = math.ceil(config.num_batches / config.num_workers)
    return baseline.makespan / (rounds * config.compute_cost)


EXERCISE = Exercise(
    build=build,
    check=check,
    bound=bound,
    target_speedup=1.8,
    scenarios=[Scenario("main", Config(), timed=True)],
    bound_note="the batches split evenly over the workers, one at a time each",
)
