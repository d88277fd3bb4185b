"""Grader: an input pipeline that prefetches batches while the model trains.

Loading a batch (a read from storage, then decoding and augmentation on a CPU) takes
longer than a training step, and now and then a read straggles (a cold file, a slow
disk): that batch takes several times longer. The cluster has several loaders, so
loads can run while the model trains and while other loads straggle; a bounded,
ordered prefetch buffer hands the batches to the model in dataset order.

Every batch holds host memory from the moment its load starts until the model takes
it (or its load is cancelled): at most `max_prefetched` (M) at any moment. Training
validates after every `validate_every` steps and stops as soon as a validation loss
is no better than the best so far (early stopping); where the stop comes is hidden.

Checks (each on every run, plain and shuffled):
- order             the model sees batches in dataset order
- every_batch_once  no batch is skipped and none is trained twice
- memory_bound      at most M batches loading or loaded-but-not-trained at any moment
- early_stop        a validation after every `validate_every` steps, each on a model
                    that did not change under it; training stops right after the first
                    one that says stop (nothing trained after it), or at the end of data
- one_load_per_loader  a loader loads one batch at a time
- one_step_at_a_time   the model trains one batch at a time
- result            train() returns the number of batches trained
(+ clean_shutdown, plausible, blocking_calls, threads from the framework: every load
still in flight at the stop must be cancelled or awaited)
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from itertools import pairwise

from runner.sdk import Check, Exercise, Scenario, most_at_once, one_at_a_time, secret
from runner.sim import Cluster
from runner.sim.clock import to_seconds
from runner.sim.core import Sim, Surface
from runner.sim.training import expect


@dataclass(frozen=True)
class Config:
    num_batches: int = 48  # the dataset, in batches
    num_loaders: int = 4
    max_prefetched: int = 6  # M: batches loading or loaded, not yet trained on
    validate_every: int = 4  # validate after every this many training steps
    # simulated costs, in seconds
    read_cost: float = 0.05  # a batch's read from storage, usually
    slow_read_cost: float = 0.40  # a straggling read
    augment_cost: float = 0.03  # decoding and augmentation, after the read
    train_cost: float = 0.04  # one training step
    validate_cost: float = 0.02
    straggle_rate: float = 0.15  # share of the batches whose read straggles
    seed: int = secret(7)  # of the straggle schedule: the trainer never sees it
    stop_at: int = secret(32)  # the step whose validation first says stop (0: never)


# -- the kit --------------------------------------------------------------------


@dataclass(eq=False)
class Hold:
    """The memory one load takes: from its start until the model takes the batch."""

    index: int
    start: int
    end: int | None = None
    loaded: bool = False


class PrefetchBatch:
    """A loaded, augmented batch: ``index`` is its place in the dataset."""

    KIT_SURFACE = Surface(const=("index", "id"))

    def __init__(self, index: int, hold: Hold) -> None:
        self.index = index
        self.id = f"b{index:02d}"
        self._hold = hold

    def __repr__(self) -> str:
        return f"Batch({self.id!r})"


class Memory:
    """The grader's record of every load's memory (never shown to the trainer)."""

    def __init__(self) -> None:
        self.holds: list[Hold] = []

    def peak(self) -> tuple[int, int]:
        """(most batches held at once, the tick it was first reached)."""
        never = 1 << 62  # still held when the run ended
        return most_at_once(
            (hold.start, never if hold.end is None else hold.end) for hold in self.holds
        )


class Loader:
    """Reads a batch from storage and augments it; one batch at a time.

    ``load(index)`` / ``await load_async(index)`` returns the batch ``index`` after
    ``read_cost + augment_cost`` (a straggling read takes ``slow_read_cost``)."""

    KIT_SURFACE = Surface(
        const=("index", "lane"), block=("load",), async_=("load_async",)
    )

    def __init__(self, sim: Sim, index: int, config: Config, slow: frozenset, memory: Memory):
        self._sim = sim
        self.index = index
        self.lane = f"loader {index}"
        self._config = config
        self._slow = slow
        self._memory = memory

    def __repr__(self) -> str:
        return f"Loader({self.index})"

    def _begin(self, index) -> tuple[Hold, float]:
        if type(index) is not int or not 0 <= index < self._config.num_batches:
            raise IndexError(
                f"load(index): index must be an int in [0, {self._config.num_batches}), "
                f"got {index!r}"
            )
        hold = Hold(index, self._sim.ticks())
        self._memory.holds.append(hold)
        config = self._config
        read = config.slow_read_cost if index in self._slow else config.read_cost
        return hold, read

    def load(self, index: int) -> PrefetchBatch:
        hold, read = self._begin(index)
        label = f"b{index:02d}"
        self._sim.block(self.lane, "read", read, label, call="Loader.load")
        self._sim.block(self.lane, "augment", self._config.augment_cost, label,
                        call="Loader.load")
        hold.loaded = True
        return PrefetchBatch(index, hold)

    async def load_async(self, index: int) -> PrefetchBatch:
        hold, read = self._begin(index)
        label = f"b{index:02d}"
        try:
            await self._sim.busy(self.lane, "read", read, label)
            await self._sim.busy(self.lane, "augment", self._config.augment_cost, label)
        except BaseException:
            hold.end = self._sim.ticks()  # a cancelled load frees its memory
            raise
        hold.loaded = True
        return PrefetchBatch(index, hold)


@dataclass
class Validation:
    version: int  # the steps taken when it started
    torn: bool  # a training step ran during the validation: the model changed under it
    loss: float
    start: int
    end: int


class TrainedModel:
    """The model: ``train_step(batch)`` trains on one batch (``train_cost``);
    ``version`` counts the steps taken."""

    lane = "trainer"
    KIT_SURFACE = Surface(
        const=("lane",), live=("version",), block=("train_step",),
        async_=("train_step_async",),
    )

    def __init__(self, sim: Sim, train_cost: float) -> None:
        self._sim = sim
        self._train_cost = train_cost
        self.version = 0
        self.started = 0  # steps started (a step changes the weights while it runs)
        self.trained: list[int] = []  # batch indices, in the order training took them
        self.taken_at: list[int] = []  # ticks

    def __repr__(self) -> str:
        return f"Model(version={self.version})"

    def _take(self, batch) -> PrefetchBatch:
        expect(batch, PrefetchBatch, "Model.train_step(batch)")
        now = self._sim.ticks()
        if batch._hold.end is None:
            batch._hold.end = now  # the model holds it now: the prefetch slot is free
        self.trained.append(batch.index)
        self.taken_at.append(now)
        self.started += 1
        return batch

    def train_step(self, batch: PrefetchBatch) -> None:
        batch = self._take(batch)
        self._sim.block(self.lane, "train", self._train_cost, batch.id, call="Model.train_step")
        self.version += 1

    async def train_step_async(self, batch: PrefetchBatch) -> None:
        batch = self._take(batch)
        await self._sim.busy(self.lane, "train", self._train_cost, batch.id)
        self.version += 1


def validation_loss(config: Config, version: int) -> float:
    """The hidden curve: falls until ``stop_at``, then no longer improves."""
    if config.stop_at and version >= config.stop_at:
        best = 1.0 / (1 + config.stop_at - config.validate_every)
        return round(best + 0.002 * (1 + version - config.stop_at), 6)
    return round(1.0 / (1 + version), 6)


class Validator:
    """``validate(model)`` / ``await validate_async(model)``: the validation loss of the
    model as it is (``validate_cost``); the model must not train meanwhile."""

    KIT_SURFACE = Surface(const=("lane",), block=("validate",), async_=("validate_async",))
    lane = "trainer"

    def __init__(self, sim: Sim, config: Config, model: TrainedModel) -> None:
        self._sim = sim
        self._config = config
        self._model = model
        self.records: list[Validation] = []

    def __repr__(self) -> str:
        return "Validator()"

    def _begin(self, model) -> tuple[int, int]:
        if model is not self._model:
            raise TypeError(f"validate(model) takes cluster.model, got {type(model).__name__}")
        return model.version, model.started

    def _record(self, version: int, started: int, start: int) -> float:
        model = self._model
        torn = started != version or model.started != started  # a step ran meanwhile
        loss = validation_loss(self._config, version)
        self.records.append(Validation(version, torn, loss, start, self._sim.ticks()))
        return loss

    def validate(self, model) -> float:
        version, started = self._begin(model)
        start = self._sim.ticks()
        self._sim.block(self.lane, "validate", self._config.validate_cost, f"v{version}",
                        call="Validator.validate")
        return self._record(version, started, start)

    async def validate_async(self, model) -> float:
        version, started = self._begin(model)
        start = self._sim.ticks()
        await self._sim.busy(self.lane, "validate", self._config.validate_cost, f"v{version}")
        return self._record(version, started, start)


@dataclass
class Dataset:
    """What the trainer knows of the data: how many batches there are."""

    num_batches: int
    memory: Memory = field(default_factory=Memory, repr=False)

    KIT_SURFACE = Surface(const=("num_batches",))


def straggling(config: Config) -> frozenset:
    """The batches whose read straggles (fixed per run, from the hidden seed)."""
    rng = random.Random(config.seed)
    return frozenset(i for i in range(config.num_batches) if rng.random() < config.straggle_rate)


def build(sim, config: Config) -> Cluster:
    dataset = Dataset(config.num_batches)
    slow = straggling(config)
    model = TrainedModel(sim, config.train_cost)
    sim.trace.declare_lanes([f"loader {i}" for i in range(config.num_loaders)] + ["trainer"])
    return Cluster(
        config=config,
        dataset=dataset,
        loaders=[Loader(sim, i, config, slow, dataset.memory) for i in range(config.num_loaders)],
        model=model,
        validator=Validator(sim, config, model),
    )


# -- checks -------------------------------------------------------------------


def expected_steps(config: Config) -> int:
    """Where a correct run stops: the first validation that does not improve, or the end."""
    best = float("inf")
    for version in range(config.validate_every, config.num_batches + 1, config.validate_every):
        loss = validation_loss(config, version)
        if loss >= best:
            return version
        best = loss
    return config.num_batches


def _order(trained: list[int]) -> Check:
    for before, after in pairwise(trained):
        if after < before:
            return Check.fail(
                "order",
                f"The model trained batch {after} after batch {before}: batches must reach "
                "the model in dataset order, even when their loads finish out of order.",
            )
    return Check.ok("order", "The model saw the batches in dataset order.")


def _every_batch_once(trained: list[int]) -> Check:
    seen: set[int] = set()
    for index in trained:
        if index in seen:
            return Check.fail("every_batch_once", f"Batch {index} was trained twice.")
        seen.add(index)
    missing = sorted(set(range(len(trained))) - seen)
    if missing:
        return Check.fail(
            "every_batch_once",
            f"Batch {missing[0]} was never trained, but later batches were: every batch "
            "up to the stop must be trained exactly once.",
        )
    return Check.ok("every_batch_once", "Every batch up to the stop was trained exactly once.")


def _memory_bound(run, config: Config) -> Check:
    peak, at = run.cluster.dataset.memory.peak()
    m = config.max_prefetched
    if peak > m:
        return Check.fail(
            "memory_bound",
            f"At t={to_seconds(at):.3f} s, {peak} batches were in memory (loading, or loaded "
            f"and not yet trained on): at most {m} may be. A batch takes its memory when its "
            "load starts, so bound the loads started, not only the finished batches waiting.",
        )
    return Check.ok("memory_bound", f"At most {peak} batches were in memory at once (bound {m}).")


def _early_stop(run, config: Config) -> Check:
    model: TrainedModel = run.cluster.model
    done, expected = len(model.trained), expected_steps(config)
    k = config.validate_every
    records = run.cluster.validator.records
    for record in records:
        if record.torn:
            return Check.fail(
                "early_stop",
                f"The validation after step {record.version} ran while the model was "
                "training, so it measured weights that were changing. Validate between "
                "steps, and decide whether to go on before the next step starts.",
            )
    validated = {r.version for r in records}
    for version in range(k, min(done, expected) + 1, k):
        if version not in validated:
            return Check.fail(
                "early_stop",
                f"No validation after step {version}: validate after every {k} steps.",
            )
    if done > expected:
        return Check.fail(
            "early_stop",
            f"The validation after step {expected} said stop, but {done - expected} more "
            f"batch{'es were' if done - expected > 1 else ' was'} trained: nothing may be "
            "trained after the stop.",
        )
    if done < expected:
        return Check.fail(
            "early_stop",
            f"Training stopped after {done} steps, but validation only says stop after "
            f"step {expected}." if expected < config.num_batches else
            f"Training stopped after {done} steps, before the end of the data "
            f"({config.num_batches} batches); no validation said stop.",
        )
    if expected < config.num_batches:
        return Check.ok("early_stop", f"Training stopped right after the validation of step "
                        f"{expected} said so.")
    return Check.ok("early_stop", "Training ran to the end of the data, validating on the way.")


def check(run, baseline) -> list[Check]:
    config: Config = run.cluster.config
    model: TrainedModel = run.cluster.model
    trained = model.trained
    checks = [
        _order(trained),
        _every_batch_once(trained),
        _memory_bound(run, config),
        _early_stop(run, config),
        one_at_a_time(
            run, (loader.lane for loader in run.cluster.loaders), "read", "one_load_per_loader",
            what="a loader loads one batch at a time: give each loader its own task.",
        ),
        one_at_a_time(
            run, ["trainer"], "train", "one_step_at_a_time",
            what="the model trains on one batch at a time, in order.",
        ),
    ]
    returned = run.returned
    ok = type(returned) is int and returned == len(trained)
    checks.append(Check.verdict(
        "result", ok, "train() returned the number of batches trained.",
        f"train() returned {returned!r}; it must return the number of batches trained "
        f"({len(trained)}).",
    ))
    return checks


def bound(baseline) -> float:
    """At best: the first batch's load, then every step and every validation back to back
    on the model (each decides whether the next step may start)."""
    config: Config = baseline.cluster.config
    steps = expected_steps(config)
    first = (config.slow_read_cost if 0 in straggling(config) else config.read_cost) + \
        config.augment_cost
    best = first + steps * config.train_cost + (steps // config.validate_every) * \
        config.validate_cost
    return baseline.makespan / best


def _batches_trained(run) -> int:
    return len(run.cluster.model.trained)


EXERCISE = Exercise(
    build=build,
    check=check,
    scenarios=[
        Scenario("main", Config(), timed=True, seeds=2),
        Scenario("end_of_data", Config(num_batches=16, stop_at=0, seed=3), seeds=3),
        Scenario("early_stop", Config(num_batches=20, stop_at=8, seed=11, max_prefetched=4)),
    ],
    target_speedup=2.7,
    bound=bound,
    bound_note=(
        "the first batch's load, then every training step and validation back to back "
        "(loads and stragglers fully hidden behind training)"
    ),
    # The work is the batches trained: cancelled prefetches are not work to count.
    work=_batches_trained,
)
