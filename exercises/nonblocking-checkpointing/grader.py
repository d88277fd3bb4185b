"""Grader: non-blocking checkpointing.

Training runs `num_steps` steps of SGD with momentum; after every `checkpoint_every`-th
step the weights and the optimizer state (the momentum) go to storage. A storage write
is slow; a copy to host memory is fast. Copying to host (blocking, consistent at one
step) and writing in the background keeps the GPU training, as long as at most
`max_in_flight` writes run at once (host memory holds that many copies).

A write reads the weights when it starts and the optimizer state half way through:
written from the live model while training goes on, a checkpoint is torn (weights of
one step, optimizer state of a later one).

The `resume` scenario starts from a storage a crashed run left behind: complete
checkpoints and one whose write never finished. Training resumes from the newest
complete one.

Checks (each on every run, plain and shuffled):
- steps             every step from the restored one to `num_steps` ran once, in order,
                    one at a time, each on its own batch
- final_weights     the weights and optimizer state at the end match the starter's
- gpu               the GPU runs one operation at a time (no copy during a step)
- consistency       every checkpoint written holds weights and optimizer state of the
                    same step, with that step's values
- schedule          one complete checkpoint of every `checkpoint_every`-th step
- in_flight         at most `max_in_flight` writes at once
- final_checkpoint  the checkpoint of the last step was complete when train() returned
- resume            training started from the newest complete checkpoint in storage
(+ clean_shutdown, plausible, blocking_calls, threads from the framework)
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from runner.sdk import Check, Exercise, Scenario, most_at_once, same_values, secret
from runner.sim import Cluster, EpochData
from runner.sim.clock import to_seconds
from runner.sim.core import Sim, Surface
from runner.sim.training import Batch, expect, mse_gradient, regression_data

DIM = 8


@dataclass(frozen=True)
class Config:
    num_steps: int = 12
    checkpoint_every: int = 2  # a checkpoint after every 2nd step (steps 2, 4, ...)
    max_in_flight: int = 2  # storage writes at once (host memory holds that many copies)
    batch_size: int = 4
    lr: float = 0.05
    momentum: float = 0.9
    # simulated costs, in seconds
    step_cost: float = 0.10  # one training step on the GPU
    snapshot_cost: float = 0.02  # copy weights + optimizer state to host memory
    write_cost: float = 0.60  # write one checkpoint to storage
    read_cost: float = 0.20  # read one checkpoint back
    restore_cost: float = 0.02  # load a checkpoint onto the GPU
    # the step whose checkpoint a crashed earlier run was writing (0: no earlier run)
    crashed_at: int = secret(0)


# -- the kit ---------------------------------------------------------------------


@dataclass(frozen=True)
class CheckpointInfo:
    """One checkpoint in storage: its step, and whether its write finished."""

    step: int
    complete: bool


class HostCopy:
    """Weights and optimizer state at one step, in host memory (or read from storage)."""

    KIT_SURFACE = Surface(const=("step",))

    def __init__(self, weights, optimizer, weights_step: int, optimizer_step: int):
        self._weights = weights
        self._optimizer = optimizer
        self._weights_step = weights_step
        self._optimizer_step = optimizer_step
        self.step = weights_step
        self._made: int | None = None  # when a snapshot took it (None: read from storage)

    def __repr__(self) -> str:
        return f"HostCopy(step={self.step})"


@dataclass
class StepRecord:
    version: int  # the step count the step started from
    batch: str
    overlapped: bool
    start: int
    end: int | None = None


class TrainState:
    """The model's weights and the optimizer's momentum, on the GPU.

    ``train_step(batch)`` runs one step of SGD with momentum (``step_cost``);
    ``snapshot()`` copies weights and optimizer state to host memory at once, consistent
    at the current step (``snapshot_cost``); ``restore(copy)`` loads a copy back
    (``restore_cost``). ``step`` counts the steps applied.
    """

    lane = "gpu"
    KIT_SURFACE = Surface(
        const=("lr", "momentum", "step_cost", "snapshot_cost", "restore_cost", "lane"),
        live=("step",),
        block=("train_step", "snapshot", "restore"),
        async_=("train_step_async", "snapshot_async", "restore_async"),
    )

    def __init__(self, sim: Sim, config: Config) -> None:
        self._sim = sim
        self.lr = config.lr
        self.momentum = config.momentum
        self.step_cost = config.step_cost
        self.snapshot_cost = config.snapshot_cost
        self.restore_cost = config.restore_cost
        self._weights = torch.zeros(DIM, dtype=torch.float64)
        self._optimizer = torch.zeros(DIM, dtype=torch.float64)
        self.step = 0
        self._running = 0
        self.steps: list[StepRecord] = []
        self.restored: list[int] = []
        self.copies: list[HostCopy] = []  # taken by snapshots, in host memory

    def __repr__(self) -> str:
        return f"TrainState(step={self.step})"

    def _update(self, batch: Batch) -> tuple[torch.Tensor, torch.Tensor]:
        momentum = self.momentum * self._optimizer + mse_gradient(self._weights, batch)
        return self._weights - self.lr * momentum, momentum

    def _begin(self, batch: Batch) -> StepRecord:
        expect(batch, Batch, "TrainState.train_step(batch)")
        record = StepRecord(self.step, batch.id, self._running > 0, self._sim.ticks())
        for other in self.steps:
            if other.end is None:
                other.overlapped = True
        self.steps.append(record)
        return record

    def _finish(self, record: StepRecord, weights, optimizer) -> None:
        self._weights, self._optimizer = weights, optimizer
        self.step = record.version + 1
        record.end = self._sim.ticks()

    def train_step(self, batch: Batch) -> None:
        record = self._begin(batch)
        weights, optimizer = self._update(batch)
        self._sim.block(self.lane, "step", self.step_cost, batch.id, call="TrainState.train_step")
        self._finish(record, weights, optimizer)

    async def train_step_async(self, batch: Batch) -> None:
        record = self._begin(batch)
        weights, optimizer = self._update(batch)  # from the state read at the start
        self._running += 1
        try:
            await self._sim.busy(self.lane, "step", self.step_cost, batch.id)
        finally:
            self._running -= 1
        self._finish(record, weights, optimizer)

    def _copy(self) -> HostCopy:
        copy = HostCopy(self._weights, self._optimizer, self.step, self.step)
        copy._made = self._sim.ticks()
        self.copies.append(copy)
        return copy

    def snapshot(self) -> HostCopy:
        copy = self._copy()
        self._sim.block(self.lane, "snapshot", self.snapshot_cost, f"s{copy.step}",
                        call="TrainState.snapshot")
        return copy

    async def snapshot_async(self) -> HostCopy:
        copy = self._copy()
        await self._sim.busy(self.lane, "snapshot", self.snapshot_cost, f"s{copy.step}")
        return copy

    def _load(self, copy: HostCopy) -> None:
        expect(copy, HostCopy, "TrainState.restore(copy)")
        self._weights, self._optimizer = copy._weights, copy._optimizer
        self.step = copy.step
        self.restored.append(copy.step)

    def restore(self, copy: HostCopy) -> None:
        expect(copy, HostCopy, "TrainState.restore(copy)")
        self._sim.block(self.lane, "restore", self.restore_cost, f"s{copy.step}",
                        call="TrainState.restore")
        self._load(copy)

    async def restore_async(self, copy: HostCopy) -> None:
        expect(copy, HostCopy, "TrainState.restore_async(copy)")
        await self._sim.busy(self.lane, "restore", self.restore_cost, f"s{copy.step}")
        self._load(copy)


@dataclass
class Entry:
    """A checkpoint file: what it holds (and from which step), and when it was written."""

    step: int
    weights: torch.Tensor | None
    optimizer: torch.Tensor | None
    weights_step: int
    optimizer_step: int | None
    start: int
    end: int | None = None
    earlier_run: bool = False
    source: object = None  # what was written: a HostCopy or the live TrainState

    @property
    def complete(self) -> bool:
        return self.end is not None


class Storage:
    """Slow, durable storage for checkpoints.

    ``write(state)`` writes a ``HostCopy`` (or the live ``TrainState``) in
    ``write_cost`` seconds: the weights first, then the optimizer state, each read when
    its half of the write begins. ``checkpoints()`` lists what storage holds, complete
    or not; ``read(step)`` returns the complete checkpoint of ``step`` as a ``HostCopy``.
    """

    lane = "storage"
    KIT_SURFACE = Surface(
        const=("write_cost", "read_cost", "lane"),
        free=("checkpoints",),
        block=("write", "read"),
        async_=("write_async", "read_async"),
    )

    def __init__(self, sim: Sim, config: Config) -> None:
        self._sim = sim
        self.write_cost = config.write_cost
        self.read_cost = config.read_cost
        self.entries: list[Entry] = []

    def __repr__(self) -> str:
        return f"Storage({len(self.entries)} checkpoints)"

    def checkpoints(self) -> list[CheckpointInfo]:
        """Every checkpoint in storage, oldest first (a rewritten step: its last write)."""
        latest: dict[int, Entry] = {}
        for entry in self.entries:
            latest[entry.step] = entry
        return [CheckpointInfo(e.step, e.complete) for e in sorted(latest.values(),
                                                                     key=lambda e: e.step)]

    @staticmethod
    def _half(state, part: str) -> tuple[torch.Tensor, int]:
        if isinstance(state, TrainState):  # the live state, as it is now
            return (state._weights, state.step) if part == "weights" else \
                (state._optimizer, state.step)
        if part == "weights":
            return state._weights, state._weights_step
        return state._optimizer, state._optimizer_step

    def _check(self, state, call: str):
        if not isinstance(state, HostCopy | TrainState):
            expect(state, HostCopy, call)
        return state

    def write(self, state) -> None:
        self._check(state, "Storage.write(state)")
        weights, weights_step = self._half(state, "weights")
        optimizer, optimizer_step = self._half(state, "optimizer")
        entry = Entry(weights_step, weights, optimizer, weights_step, optimizer_step,
                      self._sim.ticks(), source=state)
        self.entries.append(entry)
        self._sim.block(self.lane, "write", self.write_cost, f"s{entry.step}",
                        call="Storage.write")
        entry.end = self._sim.ticks()

    async def write_async(self, state) -> None:
        self._check(state, "Storage.write_async(state)")
        weights, weights_step = self._half(state, "weights")
        entry = Entry(weights_step, weights, None, weights_step, None, self._sim.ticks(),
                      source=state)
        self.entries.append(entry)
        async with self._sim.span(self.lane, "write", f"s{entry.step}"):
            await self._sim.wait(self.write_cost / 2)
            entry.optimizer, entry.optimizer_step = self._half(state, "optimizer")
            await self._sim.wait(self.write_cost / 2)
        entry.end = self._sim.ticks()

    def _find(self, step) -> Entry:
        for entry in reversed(self.entries):
            if entry.step == step:
                if not entry.complete:
                    raise ValueError(f"the checkpoint of step {step} is incomplete (its write "
                                     "never finished): it cannot be read")
                return entry
        raise ValueError(f"storage holds no checkpoint of step {step!r}")

    def _copy(self, entry: Entry) -> HostCopy:
        return HostCopy(entry.weights, entry.optimizer, entry.weights_step, entry.optimizer_step)

    def read(self, step: int) -> HostCopy:
        entry = self._find(step)
        self._sim.block(self.lane, "read", self.read_cost, f"s{step}", call="Storage.read")
        return self._copy(entry)

    async def read_async(self, step: int) -> HostCopy:
        entry = self._find(step)
        await self._sim.busy(self.lane, "read", self.read_cost, f"s{step}")
        return self._copy(entry)


def _trajectory(config: Config, batches: list[Batch]) -> dict[int, tuple]:
    """The weights and optimizer state after every step, trained without interruption."""
    weights = torch.zeros(DIM, dtype=torch.float64)
    optimizer = torch.zeros(DIM, dtype=torch.float64)
    states = {0: (weights, optimizer)}
    for step, batch in enumerate(batches[: config.num_steps]):
        optimizer = config.momentum * optimizer + mse_gradient(weights, batch)
        weights = weights - config.lr * optimizer
        states[step + 1] = (weights, optimizer)
    return states


def _data(config: Config) -> list[Batch]:
    generator = torch.Generator().manual_seed(23)
    true_weights = torch.randn(DIM, generator=generator, dtype=torch.float64)
    inputs, targets = regression_data(29, config.num_steps * config.batch_size, DIM,
                                      true_weights, 0.1)
    return EpochData(inputs, targets, config.batch_size).epoch(0)


def build(sim, config: Config) -> Cluster:
    batches = _data(config)
    sim.trace.declare_lanes(["gpu", "storage"])
    storage = Storage(sim, config)
    if config.crashed_at:
        states = _trajectory(config, batches)
        for step in range(config.checkpoint_every, config.crashed_at + 1,
                          config.checkpoint_every):
            weights, optimizer = states[step]
            done = step < config.crashed_at  # the last write was cut short by the crash
            storage.entries.append(Entry(
                step, weights, optimizer if done else None, step, step if done else None,
                start=0, end=0 if done else None, earlier_run=True,
            ))
    return Cluster(config=config, batches=batches, model=TrainState(sim, config),
                   storage=storage)


# -- checks -------------------------------------------------------------------------


def _newest_complete(storage: Storage) -> int:
    steps = [e.step for e in storage.entries if e.earlier_run and e.complete]
    return max(steps, default=0)


def _steps_problem(model: TrainState, start: int, total: int) -> str:
    for i, record in enumerate(model.steps):
        expected = start + i
        if record.overlapped:
            return (f"Training step {record.version + 1} ran while another step was running: "
                    "steps must run one after the other.")
        if record.version != expected:
            return (f"Training step {i + 1} of this run started from step {record.version}, "
                    f"not {expected}: a step was skipped or repeated.")
        if record.batch != f"e0/b{expected:02d}":
            return (f"Training step {expected + 1} trained batch {record.batch}, not "
                    f"e0/b{expected:02d} (`batches[{expected}]`).")
    done = start + len(model.steps)
    if done != total:
        return (f"Training stopped at step {done}; it must reach step {total}"
                + (f" (it resumed at step {start})." if start else "."))
    return ""


def _peak_in_flight(model: TrainState, written: list[Entry], end: int) -> tuple[int, int]:
    """(most checkpoints in flight at once, when): a host copy from when the snapshot
    took it until its last write finished (the end of the run if none did), and a write
    of the live model while it runs."""
    intervals = []
    for copy in model.copies:
        writes = [e for e in written if e.source is copy]
        finished = [e.end for e in writes if e.complete]
        intervals.append((copy._made, max(finished) if finished else end))
    for entry in written:
        if isinstance(entry.source, TrainState):
            intervals.append((entry.start, entry.end if entry.complete else end))
    return most_at_once(intervals)


def check(run, baseline) -> list[Check]:
    config: Config = run.cluster.config
    model: TrainState = run.cluster.model
    storage: Storage = run.cluster.storage
    start = model.restored[-1] if model.restored else 0
    checks = []

    problem = _steps_problem(model, start, config.num_steps)
    checks.append(Check.verdict(
        "steps", not problem,
        f"Every training step from {start} to {config.num_steps} ran once, in order.", problem,
    ))

    base: TrainState = baseline.cluster.model
    checks.append(same_values(
        "final_weights", torch.cat([model._weights, model._optimizer]),
        torch.cat([base._weights, base._optimizer]),
        ok="The final weights and optimizer state match the starter's.",
        fail="The final weights or optimizer state differ from the starter's (by up to "
        "{diff}).",
    ))

    pair = run.trace.first_overlap(run.trace.select(lane="gpu"))
    checks.append(Check.verdict(
        "gpu", pair is None, "The GPU ran one operation at a time.",
        f"The GPU ran {pair[0].op} ({pair[0].batch}) and {pair[1].op} ({pair[1].batch}) at "
        "the same time: a copy to host must not run during a training step."
        if pair else "",
    ))

    written = [e for e in storage.entries if not e.earlier_run]
    states = _trajectory(config, run.cluster.batches)
    torn = ""
    for entry in written:
        if not entry.complete:
            continue
        history = states.get(entry.step)
        if entry.optimizer_step != entry.weights_step:
            torn = (f"The checkpoint of step {entry.step} is torn: it holds the weights of step "
                    f"{entry.weights_step} and the optimizer state of step "
                    f"{entry.optimizer_step}. Training went on while it was written from the "
                    "live model; write a copy taken at one step.")
        elif history is None or not (torch.equal(entry.weights, history[0])
                                      and torch.equal(entry.optimizer, history[1])):
            torn = f"The checkpoint of step {entry.step} does not hold that step's values."
        if torn:
            break
    checks.append(Check.verdict(
        "consistency", not torn,
        "Every checkpoint holds the weights and optimizer state of one step.", torn,
    ))

    every = config.checkpoint_every
    expected = [s for s in range(start + 1, config.num_steps + 1) if s % every == 0]
    got = sorted(e.step for e in written if e.complete)
    missing = sorted(set(expected) - set(got))
    extra = sorted(set(got) - set(expected))
    twice = sorted({s for s in got if got.count(s) > 1})
    schedule = ""
    if missing:
        schedule = (f"No complete checkpoint of step {missing[0]}: every step that is a "
                    f"multiple of {every} needs one.")
    elif extra:
        schedule = (f"A checkpoint of step {extra[0]} was written; only the steps that are "
                    f"multiples of {every} are checkpointed.")
    elif twice:
        schedule = f"The checkpoint of step {twice[0]} was written twice."
    checks.append(Check.verdict(
        "schedule", not schedule,
        f"One complete checkpoint of every step that is a multiple of {every} was written.",
        schedule,
    ))

    peak, at = _peak_in_flight(model, written, run.makespan_ticks)
    checks.append(Check.verdict(
        "in_flight", peak <= config.max_in_flight,
        f"At most {config.max_in_flight} checkpoints were in flight at once.",
        f"{peak} checkpoints were in flight at once at t={to_seconds(at):.3f} s (copied to "
        "host memory or being written, and not yet complete); host memory holds at most "
        f"max_in_flight = {config.max_in_flight}: wait for a write to finish first.",
    ))

    last = [e for e in written if e.step == config.num_steps]
    ended = [e.end for e in last if e.complete and e.end <= run.makespan_ticks]
    checks.append(Check.verdict(
        "final_checkpoint", bool(ended),
        f"The checkpoint of step {config.num_steps} was complete when train() returned.",
        f"When train() returned, the checkpoint of step {config.num_steps} was "
        + ("still being written: wait for every write before returning." if last
           else "never written."),
    ))

    newest = _newest_complete(storage)
    if newest:
        resumed = model.restored == [newest] and (not model.steps
                                                  or model.steps[0].version == newest)
        where = f"the newest complete checkpoint in storage (step {newest})"
    else:
        resumed = not model.restored
        where = "step 0: storage held no complete checkpoint"
    checks.append(Check.verdict(
        "resume", resumed, f"Training started from {where}.",
        "Training "
        + (f"restored step(s) {model.restored}" if model.restored else "started from scratch")
        + f"; it must start from {where}.",
    ))
    return checks


def _timeline(config: Config) -> tuple[float, float]:
    count = config.num_steps // config.checkpoint_every
    gpu = config.num_steps * config.step_cost + count * config.snapshot_cost
    first = config.checkpoint_every * config.step_cost + config.snapshot_cost
    storage = first + count * config.write_cost / config.max_in_flight
    return gpu + config.write_cost, storage


def bound(baseline) -> float:
    """The GPU's own work then the last write, or the first copy then every write
    `max_in_flight` at a time: no program finishes before either."""
    return baseline.makespan / max(_timeline(baseline.cluster.config))


def _work(run) -> int:
    written = sum(1 for e in run.cluster.storage.entries if not e.earlier_run and e.complete)
    return len(run.cluster.model.steps) + written


EXERCISE = Exercise(
    build=build,
    check=check,
    scenarios=[
        Scenario("resume", Config(num_steps=10, crashed_at=6)),
        Scenario("main", Config(), timed=True, seeds=3),
    ],
    target_speedup=1.7,
    bound=bound,
    bound_note=(
        "the longer of: every training step and host copy on the GPU, then the last write; "
        "or the first checkpoint's copy, then every write with max_in_flight at a time"
    ),
    work=_work,
)
