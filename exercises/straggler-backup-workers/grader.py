"""Grader: synchronous SGD with backup workers (straggler mitigation).

Every optimizer step needs `gradients_per_step` (N) fresh gradients; the cluster has
N + `backup_workers` workers, and now and then a worker straggles (one computation takes
`slow_cost` instead of `compute_cost`). Launching a computation on every worker and
stepping on the first N that arrive, cancelling the rest, hides the stragglers.

Checks (each on every run, plain and shuffled):
- steps                 exactly `num_steps` optimizer steps ran
- accumulation          every step averaged exactly N gradients, all computed on the
                        current weights, never from a half-written buffer
- optimizer_steps       optimizer steps never overlap
- one_batch_per_worker  a worker computes one batch at a time (a straggler still busy
                        cannot take the next step's batch)
- batches               no batch is trained twice
- result                train() returns a snapshot of the final weights
(+ clean_shutdown, plausible, blocking_calls, threads from the framework)
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import torch

from runner.sdk import Check, Exercise, Scenario, one_at_a_time, secret
from runner.sim import BatchQueue, Cluster, EpochData, Gradient, GradientBuffer, Model, Worker
from runner.sim.training import Batch, Snapshot, expect, mse_gradient, read_weights, regression_data

DIM = 8


@dataclass(frozen=True)
class Config:
    gradients_per_step: int = 4  # N: gradients averaged by every optimizer step
    backup_workers: int = 1  # workers beyond N
    num_steps: int = 10
    batch_size: int = 4
    lr: float = 0.05
    # simulated costs, in seconds
    compute_cost: float = 0.10  # a gradient, usually
    slow_cost: float = 0.50  # a gradient on a straggling worker
    add_cost: float = 0.01
    step_cost: float = 0.02
    snapshot_cost: float = 0.01
    straggle_rate: float = 0.8  # share of rounds in which `backup_workers` workers straggle
    seed: int = secret(5)  # of the straggle schedule: the trainer never sees it

    @property
    def num_workers(self) -> int:
        return self.gradients_per_step + self.backup_workers


class StragglingWorker(Worker):
    """A worker whose computations sometimes straggle: its k-th computation costs
    `slow_cost` when k is in its slow set (fixed per run, unknown to the trainer)."""

    def __init__(self, sim, index: int, compute_cost: float, slow_cost: float, slow_calls):
        super().__init__(sim, index, compute_cost)
        self.sim = sim
        self.slow_cost = slow_cost
        self._slow_calls = frozenset(slow_calls)
        self._calls = 0

    def _next_cost(self) -> float:
        call = self._calls
        self._calls += 1
        return self.slow_cost if call in self._slow_calls else self.compute_cost

    def _compute(self, weights, batch: Batch) -> Gradient:
        expect(batch, Batch, "batch")
        values, version = read_weights(weights)
        return Gradient(mse_gradient(values, batch), batch.id, version, self.index)

    def compute_gradient(self, weights, batch: Batch) -> Gradient:
        gradient = self._compute(weights, batch)
        self.sim.block(self.lane, "compute", self._next_cost(), batch.id,
                       call="Worker.compute_gradient")
        return gradient

    async def compute_gradient_async(self, weights, batch: Batch) -> Gradient:
        gradient = self._compute(weights, batch)
        await self.sim.busy(self.lane, "compute", self._next_cost(), batch.id)
        return gradient


def straggles(config: Config) -> dict[int, set[int]]:
    """worker -> the indices of its computations that straggle: in most rounds,
    `backup_workers` distinct workers (never more), from a fixed seed."""
    rng = random.Random(config.seed)
    slow: dict[int, set[int]] = {i: set() for i in range(config.num_workers)}
    for round_ in range(4 * config.num_steps):
        if rng.random() < config.straggle_rate:
            for worker in rng.sample(range(config.num_workers), config.backup_workers):
                slow[worker].add(round_)
    return slow


def build(sim, config: Config) -> Cluster:
    generator = torch.Generator().manual_seed(17)
    true_weights = torch.randn(DIM, generator=generator, dtype=torch.float64)
    count = config.num_steps * (config.num_workers + 2)
    inputs, targets = regression_data(19, count * config.batch_size, DIM, true_weights, 0.1)
    slow = straggles(config)
    sim.trace.declare_lanes(
        [f"worker {i}" for i in range(config.num_workers)] + ["accumulator", "optimizer"]
    )
    return Cluster(
        config=config,
        data=BatchQueue(EpochData(inputs, targets, config.batch_size).epoch(0)),
        workers=[
            StragglingWorker(sim, i, config.compute_cost, config.slow_cost, slow[i])
            for i in range(config.num_workers)
        ],
        buffer=GradientBuffer(sim, DIM, config.add_cost),
        model=Model(
            sim,
            torch.zeros(DIM, dtype=torch.float64),
            lr=config.lr,
            step_cost=config.step_cost,
            snapshot_cost=config.snapshot_cost,
        ),
    )


# -- checks -------------------------------------------------------------------


def _first_problem(model: Model, n: int) -> str:
    for i, step in enumerate(model.steps):
        if step.half_written:
            return f"Optimizer step {i} read the buffer while a gradient was still being added."
        stale = [v for v in step.grad_versions if v != step.version]
        if stale:
            return (f"Optimizer step {i} (weights v{step.version}) averaged a gradient computed "
                    f"on weights v{stale[0]}: a late gradient from an earlier step was added.")
        if step.count < n:
            return (f"Optimizer step {i} averaged {step.count} gradients instead of {n}: a "
                    "gradient was lost (concurrent adds?), or the step ran too early.")
        if step.count > n:
            return (f"Optimizer step {i} averaged {step.count} gradients instead of {n}: more "
                    "than N were added before the step.")
    return ""


def check(run, baseline) -> list[Check]:
    config: Config = run.cluster.config
    model: Model = run.cluster.model
    n = config.gradients_per_step
    checks = []

    done = len(model.steps)
    checks.append(Check.verdict(
        "steps", done == config.num_steps,
        f"Training ran the {config.num_steps} optimizer steps.",
        f"Training ran {done} optimizer steps; it must run {config.num_steps}.",
    ))

    problem = _first_problem(model, n)
    checks.append(Check.verdict(
        "accumulation", not problem, f"Every step averaged exactly {n} fresh gradients.", problem,
    ))

    overlapping = [i for i, step in enumerate(model.steps) if step.overlapped]
    checks.append(Check.verdict(
        "optimizer_steps", not overlapping, "Optimizer steps never overlapped.",
        f"Optimizer step {overlapping[0] if overlapping else 0} ran while another step was "
        "running: steps must be one at a time.",
    ))

    checks.append(one_at_a_time(
        run, (w.lane for w in run.cluster.workers), "compute", "one_batch_per_worker",
        what="a worker computes one batch at a time, so a straggler's computation must be "
        "cancelled (or finished) before that worker takes another batch.",
    ))

    seen: set[str] = set()
    twice = ""
    for i, step in enumerate(model.steps):
        for batch in step.batches:
            if batch in seen:
                twice = f"Batch {batch} was trained twice (again in step {i})."
                break
            seen.add(batch)
        if twice:
            break
    checks.append(Check.verdict("batches", not twice, "No batch was trained twice.", twice))

    returned = run.returned
    values = getattr(returned, "values", None)
    ok = (
        isinstance(returned, Snapshot)  # a copy taken at the end, not the live model
        and isinstance(values, torch.Tensor)
        and getattr(returned, "version", None) == len(model.steps)
        and torch.equal(values, model.values)
    )
    checks.append(Check.verdict(
        "result", ok, "train() returned a snapshot of the final weights.",
        f"train() returned {type(returned).__name__}"
        + (f" (version {getattr(returned, 'version', None)})" if values is not None else "")
        + f"; it must return a snapshot of the final weights (version {len(model.steps)}).",
    ))
    return checks


def bound(baseline) -> float:
    """Per step, at best: one computation at the usual cost, the N adds one after the
    other (the buffer is a read-modify-write), and the step; then the final snapshot."""
    config: Config = baseline.cluster.config
    per_step = config.compute_cost + config.gradients_per_step * config.add_cost + \
        config.step_cost
    return baseline.makespan / (config.num_steps * per_step + config.snapshot_cost)


def _gradients_applied(run) -> int:
    return sum(step.count for step in run.cluster.model.steps)


EXERCISE = Exercise(
    build=build,
    check=check,
    scenarios=[
        Scenario("main", Config(), timed=True, seeds=4),
        Scenario("two_backups", Config(backup_workers=2, num_steps=6, seed=11)),
    ],
    target_speedup=3.5,
    bound=bound,
    bound_note=(
        "per step: one computation at the usual cost, the N adds in turn and the optimizer "
        "step (stragglers fully hidden by the backups), then the final snapshot"
    ),
    # The work is the gradients applied: cancelling a straggler wastes part of a
    # computation, so time spent computing is no measure of it.
    work=_gradients_applied,
)
