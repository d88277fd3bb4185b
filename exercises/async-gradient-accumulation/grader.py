"""Grader: gradient accumulation with async validation and early stopping.

Checks (each on every run, plain and shuffled):
- final_weights     train() returns the baseline's weights (those of the stopping epoch)
- accumulation      every step averages exactly `accumulation_steps` gradients, all
                    computed on the current weights, never from a half-written buffer
- optimizer_steps   optimizer steps never overlap
- in_flight         a worker computes one batch at a time (so at most num_workers at once)
- validation        every validation sees the weights of the end of an epoch, and every
                    epoch up to the stopping one is validated
- early_stopping    training stops at the baseline's epoch: every batch up to it trained
                    once, nothing beyond the next epoch started
(+ clean_shutdown, plausible, blocking_calls, threads from the framework)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from runner.sdk import Check, Exercise, Scenario
from runner.sim import Cluster, EpochData, GradientBuffer, Model, Validator, Worker
from runner.sim.training import Snapshot, regression_data

DIM = 8


@dataclass(frozen=True)
class Config:
    num_workers: int = 4
    accumulation_steps: int = 8
    batches_per_epoch: int = 16
    batch_size: int = 4
    max_epochs: int = 10
    patience: int = 2
    min_delta: float = 0.0
    lr: float = 0.05
    # simulated costs, in seconds
    compute_cost: float = 0.10
    add_cost: float = 0.01
    step_cost: float = 0.02
    snapshot_cost: float = 0.01
    validate_cost: float = 0.40

    @property
    def steps_per_epoch(self) -> int:
        return self.batches_per_epoch // self.accumulation_steps


def build(sim, config: Config) -> Cluster:
    generator = torch.Generator().manual_seed(7)
    true_weights = torch.randn(DIM, generator=generator, dtype=torch.float64)
    # Validation data comes from a shifted task, so the validation loss first falls,
    # then rises: the patience rule stops training part-way.
    shifted = 0.55 * true_weights
    n = config.batches_per_epoch * config.batch_size
    inputs, targets = regression_data(11, n, DIM, true_weights, noise=0.1)
    val_inputs, val_targets = regression_data(13, 64, DIM, shifted, noise=0.1)
    sim.trace.declare_lanes(
        [f"worker {i}" for i in range(config.num_workers)]
        + ["accumulator", "optimizer", "validator"]
    )
    return Cluster(
        config=config,
        data=EpochData(inputs, targets, config.batch_size),
        workers=[Worker(sim, i, config.compute_cost) for i in range(config.num_workers)],
        buffer=GradientBuffer(sim, DIM, config.add_cost),
        model=Model(
            sim,
            torch.zeros(DIM, dtype=torch.float64),
            lr=config.lr,
            step_cost=config.step_cost,
            snapshot_cost=config.snapshot_cost,
        ),
        validator=Validator(sim, val_inputs, val_targets, config.validate_cost),
    )


# -- checks -------------------------------------------------------------------


def _weights(run):
    """The weights of the snapshot train() returned. The prompt promises a snapshot (a
    copy the model made at the end); the live model, or a tensor read off it, is not one."""
    value = run.returned
    return value.values if isinstance(value, Snapshot) else None


def _epoch_of(batch_id: str) -> int:
    return int(batch_id[1:].split("/")[0])


def check(run, baseline) -> list[Check]:
    config: Config = run.cluster.config
    steps_per_epoch = config.steps_per_epoch
    model: Model = run.cluster.model
    checks = []

    # final_weights
    expected = _weights(baseline)
    got = _weights(run)
    if got is None:
        checks.append(
            Check.fail(
                "final_weights",
                f"train() returned {type(run.returned).__name__}; it must return the snapshot of "
                "the weights at the end of the last epoch that counts.",
            )
        )
    else:
        diff = float((got - expected).abs().max()) if got.shape == expected.shape else math.inf
        checks.append(
            Check.verdict(
                "final_weights",
                torch.allclose(got, expected, rtol=1e-9, atol=1e-12) if diff != math.inf else False,
                "The returned weights equal the baseline's.",
                f"The returned weights differ from the baseline's (largest difference {diff:.3g}).",
            )
        )

    # accumulation
    problem = None
    for i, step in enumerate(model.steps):
        if step.count != config.accumulation_steps:
            problem = (
                f"Optimizer step {i} averaged {step.count} gradients instead of "
                f"{config.accumulation_steps} (a gradient was lost, or the step ran too early)."
            )
        elif step.half_written:
            problem = f"Optimizer step {i} read the buffer while a gradient was still being added."
        else:
            stale = [v for v in step.grad_versions if v != step.version]
            if stale:
                problem = (
                    f"Optimizer step {i} (weights v{step.version}) averaged a gradient "
                    f"computed on weights v{stale[0]}."
                )
        if problem:
            break
    checks.append(
        Check.verdict(
            "accumulation",
            problem is None,
            f"Every step averaged exactly {config.accumulation_steps} fresh gradients.",
            problem or "",
        )
    )

    # optimizer_steps
    overlapping = [i for i, step in enumerate(model.steps) if step.overlapped]
    checks.append(
        Check.verdict(
            "optimizer_steps",
            not overlapping,
            "Optimizer steps never overlapped.",
            f"Optimizer step {overlapping[0] if overlapping else 0} ran while another step was "
            "running: steps must be one at a time.",
        )
    )

    # in_flight
    problem = None
    for worker in run.cluster.workers:
        pair = run.trace.first_overlap(run.trace.select(lane=worker.lane, op="compute"))
        if pair:
            problem = (
                f"{worker.lane} computed {pair[0].batch} and {pair[1].batch} at the same time; "
                "a worker computes one batch at a time."
            )
            break
    peak, _ = run.trace.max_concurrency(run.trace.select(op="compute"))
    if problem is None and peak > config.num_workers:
        problem = f"{peak} gradient computations ran at once (at most {config.num_workers})."
    checks.append(
        Check.verdict(
            "in_flight",
            problem is None,
            f"At most one batch per worker in flight (peak {peak}).",
            problem or "",
        )
    )

    # validation
    base_losses = {
        r.version // steps_per_epoch - 1: r.loss for r in baseline.cluster.validator.records
    }
    stop_epoch = max(base_losses)
    seen: dict[int, float] = {}
    problem = None
    for record in run.cluster.validator.records:
        if record.version is None or record.version == 0 or record.version % steps_per_epoch:
            problem = (
                f"A validation saw weights v{record.version}, which is not the end of an epoch "
                f"(epochs end every {steps_per_epoch} steps): validate a snapshot taken when "
                "the epoch ends."
            )
            break
        seen[record.version // steps_per_epoch - 1] = record.loss
    if problem is None:
        missing = [e for e in range(stop_epoch + 1) if e not in seen]
        if missing:
            problem = f"Epoch {missing[0]} was never validated (epochs 0-{stop_epoch} must be)."
    checks.append(
        Check.verdict(
            "validation",
            problem is None,
            f"Validation saw the weights of each epoch it validated ({len(seen)} epochs).",
            problem or "",
        )
    )

    # early_stopping
    trained: dict[str, int] = {}
    for step in model.steps:
        for batch in step.batches:
            trained[batch] = trained.get(batch, 0) + 1
    computed_epochs = {_epoch_of(s.batch) for s in run.trace.select(op="compute") if s.batch}
    last_started = max(computed_epochs, default=-1)
    problem = None
    for epoch in range(stop_epoch + 1):
        for batch in run.cluster.data.epoch(epoch):
            if trained.get(batch.id, 0) != 1:
                problem = (
                    f"Batch {batch.id} was trained {trained.get(batch.id, 0)} times; every batch "
                    f"of epochs 0-{stop_epoch} must be trained exactly once."
                )
                break
        if problem:
            break
    if problem is None and last_started > stop_epoch + 1:
        problem = (
            f"Training went on into epoch {last_started}, but the patience rule stops after "
            f"epoch {stop_epoch} (at most the next epoch may have started meanwhile)."
        )
    checks.append(
        Check.verdict(
            "early_stopping",
            problem is None,
            f"Training stopped after epoch {stop_epoch}, as the patience rule says.",
            problem or "",
        )
    )
    return checks


def bound(baseline) -> float:
    """Best possible speedup: per step, the computations split over the workers, then
    the last add and the step; plus the final epoch's snapshot and validation."""
    config: Config = baseline.cluster.config
    steps = len(baseline.cluster.model.steps)
    rounds = math.ceil(config.accumulation_steps / config.num_workers)
    per_step = (
        max(
            rounds * config.compute_cost + config.add_cost,
            config.compute_cost + config.accumulation_steps * config.add_cost,
        )
        + config.step_cost
    )
    best = steps * per_step + config.snapshot_cost + config.validate_cost
    return baseline.makespan / best


EXERCISE = Exercise(
    build=build,
    check=check,
    scenarios=[
        Scenario("main", Config(), timed=True, seeds=2),
        Scenario("no_early_stop", Config(max_epochs=3, patience=5, batches_per_epoch=8)),
    ],
    target_speedup=3.0,
    bound=bound,
    bound_note=(
        "per optimizer step: ceil(accumulation_steps / num_workers) computations, "
        "one add and the step, with validation hidden behind training"
    ),
)
