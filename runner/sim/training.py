"""Data-parallel training parts: data, the model, workers, the gradient buffer, validation.

The numbers are real: a linear model ``y = X @ w`` trained on mean squared error
with float64 tensors from fixed seeds, so a run's weights can be compared with the
baseline's. Only time is simulated.

Every operation comes twice: ``op(...)`` blocks (costs its time, nothing else runs
meanwhile) and ``await op_async(...)`` lets other tasks run while it takes its time.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from runner.sim.core import Sim, Surface


@dataclass(frozen=True, eq=False)
class Batch:
    """A (micro-)batch of training examples. ``id`` names it in traces and checks."""

    id: str
    inputs: torch.Tensor
    targets: torch.Tensor
    epoch: int = 0
    index: int = 0

    KIT_SURFACE = Surface(const=("id", "epoch", "index", "inputs", "targets"))

    def __repr__(self) -> str:
        return f"Batch({self.id!r})"


@dataclass(frozen=True, eq=False)
class Snapshot:
    """A frozen copy of the model's weights at one version."""

    values: torch.Tensor
    version: int

    KIT_SURFACE = Surface(const=("version", "values"))

    def __repr__(self) -> str:
        return f"Snapshot(version={self.version})"


@dataclass(frozen=True, eq=False)
class Gradient:
    """The gradient of one batch, computed on the weights of ``version``."""

    values: torch.Tensor
    batch: str
    version: int | None  # None: computed on weights read while they were changing
    worker: int
    weights_from: tuple | None = None  # the origin of the weights (see Sim.mark)

    KIT_SURFACE = Surface(const=("batch", "version", "worker", "values"))

    def __repr__(self) -> str:
        return f"Gradient(batch={self.batch!r}, version={self.version})"


def _describe(value) -> str:
    if hasattr(value, "__await__"):
        return f"{type(value).__name__} (did you forget `await`?)"
    return type(value).__name__


def expect(value, kind: type, what: str):
    if not isinstance(value, kind):
        raise TypeError(f"{what} must be a {kind.__name__}, got {_describe(value)}")
    return value


def read_weights(weights) -> tuple[torch.Tensor, int | None]:
    """(values, version) of a Model, Snapshot or pulled Params."""
    if isinstance(weights, Model):
        return weights._values, weights.version
    values = getattr(weights, "values", None)
    if isinstance(values, torch.Tensor) and hasattr(weights, "version"):
        return values, weights.version
    raise TypeError(f"weights must be a Model, Snapshot or Params, got {_describe(weights)}")


def mse_gradient(w: torch.Tensor, batch: Batch) -> torch.Tensor:
    residual = batch.inputs @ w - batch.targets
    return batch.inputs.T @ residual * (2.0 / len(batch.targets))


def mse_loss(w: torch.Tensor, inputs: torch.Tensor, targets: torch.Tensor) -> float:
    residual = inputs @ w - targets
    return float(residual @ residual) / len(targets)


class Worker:
    """A device that computes gradients, one batch at a time.

    ``compute_gradient(weights, batch)`` reads the weights when it starts (a Model's
    current weights, a Snapshot, or Params pulled from a server) and returns a
    :class:`Gradient` after ``compute_cost`` simulated seconds.
    """

    KIT_SURFACE = Surface(
        const=("index", "compute_cost", "lane"),
        block=("compute_gradient",),
        async_=("compute_gradient_async",),
    )

    def __init__(self, sim: Sim, index: int, compute_cost: float) -> None:
        self._sim = sim
        self.index = index
        self.compute_cost = compute_cost
        self.lane = f"worker {index}"

    def __repr__(self) -> str:
        return f"Worker({self.index}, compute_cost={self.compute_cost})"

    def _gradient(self, weights, batch: Batch) -> Gradient:
        expect(batch, Batch, "batch")
        values, version = read_weights(weights)
        return Gradient(
            mse_gradient(values, batch), batch.id, version, self.index, self._sim.origin(weights)
        )

    def compute_gradient(self, weights, batch: Batch) -> Gradient:
        gradient = self._gradient(weights, batch)
        self._sim.block(
            self.lane, "compute", self.compute_cost, batch.id, call="Worker.compute_gradient"
        )
        return gradient

    async def compute_gradient_async(self, weights, batch: Batch) -> Gradient:
        gradient = self._gradient(weights, batch)
        await self._sim.busy(self.lane, "compute", self.compute_cost, batch.id)
        return gradient


@dataclass
class StepRecord:
    """What one optimizer step consumed (for the checks)."""

    version: int  # the weights' version the step started from
    count: int  # gradients averaged
    batches: tuple[str, ...]
    grad_versions: tuple[int | None, ...]
    half_written: bool  # an add into the buffer was in progress when the step read it
    overlapped: bool  # another step was running at the same time
    start: int = 0
    end: int | None = None  # None while the step runs


class GradientBuffer:
    """Accumulates gradients until the optimizer takes their average.

    ``add`` is a read-modify-write over a link that takes ``add_cost`` seconds: the
    buffer is read, the gradient travels, the sum is written back. Two adds running
    at the same time both start from the same sum, and one of them is lost.
    """

    lane = "accumulator"
    KIT_SURFACE = Surface(
        const=("add_cost", "lane"), live=("count",), block=("add",), async_=("add_async",),
        length=True,
    )

    def __init__(self, sim: Sim, size: int, add_cost: float) -> None:
        self._sim = sim
        self.add_cost = add_cost
        self._sum = torch.zeros(size, dtype=torch.float64)
        self._batches: tuple[str, ...] = ()
        self._versions: tuple[int | None, ...] = ()
        self._writers = 0

    def __len__(self) -> int:
        """How many gradients the buffer holds now."""
        return len(self._batches)

    @property
    def count(self) -> int:
        return len(self._batches)

    def __repr__(self) -> str:
        return f"GradientBuffer(count={self.count})"

    def add(self, gradient: Gradient) -> None:
        expect(gradient, Gradient, "GradientBuffer.add(gradient)")
        self._sim.block(self.lane, "add", self.add_cost, gradient.batch, call="GradientBuffer.add")
        self._sum = self._sum + gradient.values
        self._batches += (gradient.batch,)
        self._versions += (gradient.version,)

    async def add_async(self, gradient: Gradient) -> None:
        expect(gradient, Gradient, "GradientBuffer.add_async(gradient)")
        total, batches, versions = self._sum, self._batches, self._versions  # read
        self._writers += 1
        try:
            await self._sim.busy(self.lane, "add", self.add_cost, gradient.batch)
        finally:
            self._writers -= 1
        self._sum = total + gradient.values  # write back what was read, plus ours
        self._batches = (*batches, gradient.batch)
        self._versions = (*versions, gradient.version)

    def _take(self) -> tuple[torch.Tensor, tuple[str, ...], tuple[int | None, ...], bool]:
        taken = (self._sum, self._batches, self._versions, self._writers > 0)
        self._sum = torch.zeros_like(self._sum)
        self._batches = ()
        self._versions = ()
        return taken


class Model:
    """The weights being trained, with plain SGD.

    ``step(buffer)`` takes the average of the gradients in ``buffer``, empties it,
    and applies ``weights -= lr * average`` (``step_cost`` seconds). The version
    counts the steps applied. ``snapshot()`` copies the weights (``snapshot_cost``).
    """

    lane = "optimizer"
    KIT_SURFACE = Surface(
        const=("lr", "step_cost", "snapshot_cost", "lane"),
        live=("version", "values"),
        block=("step", "snapshot"),
        async_=("step_async", "snapshot_async"),
    )

    def __init__(
        self, sim: Sim, weights: torch.Tensor, *, lr: float, step_cost: float, snapshot_cost: float
    ) -> None:
        self._sim = sim
        self._values = weights.clone()
        self.version = 0
        self.lr = lr
        self.step_cost = step_cost
        self.snapshot_cost = snapshot_cost
        self._stepping = 0
        self.steps: list[StepRecord] = []

    def __repr__(self) -> str:
        return f"Model(version={self.version})"

    @property
    def values(self) -> torch.Tensor:
        """A copy of the current weights."""
        return self._values.clone()

    def snapshot(self) -> Snapshot:
        values, version = self._values.clone(), self.version
        self._sim.block("optimizer", "snapshot", self.snapshot_cost, call="Model.snapshot")
        return self._made(Snapshot(values, version))

    async def snapshot_async(self) -> Snapshot:
        values, version = self._values.clone(), self.version
        await self._sim.busy("optimizer", "snapshot", self.snapshot_cost)
        return self._made(Snapshot(values, version))

    def _made(self, snapshot: Snapshot) -> Snapshot:
        self._sim.mark(snapshot, "snapshot", snapshot.version, self._sim.ticks())
        return snapshot

    def _begin_step(self, buffer: GradientBuffer) -> tuple[StepRecord, torch.Tensor, torch.Tensor]:
        expect(buffer, GradientBuffer, "Model.step(buffer)")
        total, batches, versions, half_written = buffer._take()
        record = StepRecord(
            version=self.version,
            count=len(batches),
            batches=batches,
            grad_versions=versions,
            half_written=half_written,
            overlapped=self._stepping > 0,
            start=self._sim.ticks(),
        )
        if self._stepping and self.steps:
            for other in reversed(self.steps):
                if other.end is None:
                    other.overlapped = True
        self.steps.append(record)
        if not batches:
            raise ValueError("Model.step: the gradient buffer is empty")
        return record, self._values, total / len(batches)

    def step(self, buffer: GradientBuffer) -> None:
        record, values, average = self._begin_step(buffer)
        self._sim.block(self.lane, "step", self.step_cost, call="Model.step")
        self._values = values - self.lr * average
        self.version = record.version + 1
        record.end = self._sim.ticks()

    async def step_async(self, buffer: GradientBuffer) -> None:
        record, values, average = self._begin_step(buffer)
        self._stepping += 1
        try:
            await self._sim.busy(self.lane, "step", self.step_cost)
        finally:
            self._stepping -= 1
        self._values = values - self.lr * average  # computed from the weights read at the start
        self.version = record.version + 1
        record.end = self._sim.ticks()


@dataclass
class ValidationRecord:
    version: int | None  # version of the weights validated
    loss: float
    start: int
    end: int
    live: bool  # validated the live model rather than a snapshot


class Validator:
    """Computes the validation loss of some weights in ``cost`` seconds.

    Pass a :class:`Snapshot`; given the live :class:`Model`, it reads the weights
    as they are when the validation pass ends.
    """

    lane = "validator"
    KIT_SURFACE = Surface(
        const=("cost", "lane"), block=("validate",), async_=("validate_async",)
    )

    def __init__(self, sim: Sim, inputs: torch.Tensor, targets: torch.Tensor, cost: float):
        self._sim = sim
        self._inputs = inputs
        self._targets = targets
        self.cost = cost
        self.records: list[ValidationRecord] = []

    def __repr__(self) -> str:
        return f"Validator(cost={self.cost})"

    def _finish(self, weights, start: int) -> float:
        values, version = read_weights(weights)
        loss = mse_loss(values, self._inputs, self._targets)
        live = isinstance(weights, Model)
        self.records.append(ValidationRecord(version, loss, start, self._sim.ticks(), live))
        return loss

    def validate(self, weights) -> float:
        read_weights(weights)  # type check before spending the time
        start = self._sim.ticks()
        self._sim.block(
            self.lane, "validate", self.cost, _label(weights), call="Validator.validate"
        )
        return self._finish(weights, start)

    async def validate_async(self, weights) -> float:
        read_weights(weights)
        start = self._sim.ticks()
        await self._sim.busy(self.lane, "validate", self.cost, _label(weights))
        return self._finish(weights, start)


def _label(weights) -> str:
    version = getattr(weights, "version", None)
    return f"v{version}" if version is not None else "live"


@dataclass
class EpochData:
    """The training set, split into the same micro-batches every epoch."""

    inputs: torch.Tensor
    targets: torch.Tensor
    batch_size: int
    _cache: dict[int, list[Batch]] = field(default_factory=dict, repr=False)

    KIT_SURFACE = Surface(const=("batch_size", "batches_per_epoch"), free=("epoch",))

    @property
    def batches_per_epoch(self) -> int:
        return len(self.targets) // self.batch_size

    def epoch(self, epoch: int) -> list[Batch]:
        """The micro-batches of ``epoch``, in order (ids like ``e2/b05``)."""
        if epoch not in self._cache:
            size = self.batch_size
            self._cache[epoch] = [
                Batch(
                    f"e{epoch}/b{i:02d}",
                    self.inputs[i * size : (i + 1) * size],
                    self.targets[i * size : (i + 1) * size],
                    epoch,
                    i,
                )
                for i in range(self.batches_per_epoch)
            ]
        return list(self._cache[epoch])


class BatchQueue:
    """A shared source of batches: ``next_batch()`` returns the next one, or None when done."""

    KIT_SURFACE = Surface(
        const=("total",), live=("remaining",), queue=("next_batch", "_upcoming")
    )

    def __init__(self, batches: list[Batch]) -> None:
        self._batches = list(batches)
        self._next = 0
        self.total = len(batches)

    def __repr__(self) -> str:
        return f"BatchQueue({self.remaining} of {self.total} left)"

    @property
    def remaining(self) -> int:
        return self.total - self._next

    def _upcoming(self) -> list[Batch]:
        return self._batches[self._next :]

    def next_batch(self) -> Batch | None:
        if self._next >= len(self._batches):
            return None
        batch = self._batches[self._next]
        self._next += 1
        return batch


def regression_data(
    seed: int, n: int, dim: int, true_weights: torch.Tensor, noise: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs and targets for ``y = X @ true_weights + noise``, from a fixed seed."""
    generator = torch.Generator().manual_seed(seed)
    inputs = torch.randn(n, dim, generator=generator, dtype=torch.float64)
    targets = inputs @ true_weights + noise * torch.randn(
        n, generator=generator, dtype=torch.float64
    )
    return inputs, targets
