"""Grader: gradient accumulation fed from host memory, copies overlapped with compute.

The training and validation data live in pinned host memory, as a data set too large for
the GPU does; every micro-batch has to be copied to the device before it is trained on.
On a GPU the copy engines move data while the SMs compute, so the overlap that pays is a
copy on a side stream under the current batch's compute.

Checks (on the checked run, with races amplified, and again on every timed run):
- validation     every validation pass read one epoch's end-of-epoch weights as the
                 sequential run has them (a later epoch than the pass before it), and
                 the loss it returned equals a recomputation on those weights over the
                 real validation data (so every validation batch it was given had fully
                 arrived and was not overwritten); epochs 0..S were all validated
- losses         the losses train() returns equal the sequential run's, epoch by epoch
- stop_epoch     training stops after the sequential run's epoch S
- final_weights  the returned weights equal the sequential run's at epoch S
- wasted_work    every optimizer step of epochs 0..S happened, and at most one more
                 epoch was trained
(+ host_syncs, plausible and timing_spread from runner/gpu/grading.py)

A micro-batch read before its copy had landed, or whose device memory a later copy
reused while training still read it, changes that step's gradients: the next validation
then reads weights that are no epoch's end, and `validation` fails. When it fails, the
checks built on its results (losses, stop_epoch, final_weights, wasted_work) are skipped.

Races are amplified on the checked run (runner/gpu/kit.py): in even epochs every copy of
a job's host batch waits on its stream before it starts (an unordered reader runs ahead
of the data), in odd epochs every forward pass waits on its stream (a copy that reuses
memory still being read overwrites it first).

Tolerances: weights within 1e-4 (absolute; they are of order 0.1 and one epoch moves
them by more than 3e-3), losses within 1e-4 relative, a validation's loss within 1e-5
relative of its recomputation. The reference refuses to grade (the device is unfit) when
two epochs' weights are closer than 10x the weight tolerance or an early-stopping
decision is closer than 1e-3 relative.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F

from runner.exercise import GpuExercise
from runner.gpu.kit import CountingSGD, host_batches, max_difference
from runner.result import Check

WEIGHT_ATOL = 1e-4
LOSS_RTOL = 1e-4
RECOMPUTE_RTOL = 1e-5
SEPARATION = 10 * WEIGHT_ATOL  # consecutive epochs must differ by more than this
DECISION_MARGIN = 1e-3  # relative distance of every loss from its early-stop threshold


@dataclass(frozen=True)
class Config:
    """The candidate sees it as ``job.config``. The sizes make one micro-batch's copy
    from pinned host memory take about as long as its forward and backward pass on an
    H100 (float32, TF32 off): see runner/README.md, "Measured on a real GPU"."""

    inputs: int = 4096
    hidden: int = 512
    outputs: int = 16
    micro_batch: int = 4096  # rows per micro-batch
    micro_batches: int = 8  # per epoch
    accumulation_steps: int = 2  # micro-batches per optimizer step
    val_rows: int = 8192
    val_batch: int = 4096
    max_epochs: int = 16
    patience: int = 2
    min_delta: float = 0.003
    lr: float = 0.12
    momentum: float = 0.9
    shift: float = 0.5  # validation targets: shift x the training teacher

    @property
    def steps_per_epoch(self) -> int:
        return self.micro_batches // self.accumulation_steps

    @property
    def validation_batches(self) -> int:
        return self.val_rows // self.val_batch


CPU_CONFIG = Config(
    inputs=16, hidden=32, outputs=4, micro_batch=16, val_rows=256, val_batch=16, lr=0.05,
    min_delta=0.002,
)


# -- the job --------------------------------------------------------------------------


def _mlp(weights: list[torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    w1, b1, w2, b2, w3, b3 = weights
    h = torch.relu(torch.addmm(b1, x, w1.t()))
    h = torch.relu(torch.addmm(b2, h, w2.t()))
    return torch.addmm(b3, h, w3.t())


def _data_key(config: Config) -> tuple:
    return (config.inputs, config.hidden, config.outputs, config.micro_batch,
            config.micro_batches, config.val_rows, config.shift)  # fmt: skip


_host_data: dict[tuple, tuple] = {}


def _make_host_data(config: Config) -> tuple:
    """Synthetic regression data and initial weights, made from fixed seeds on the CPU
    (identical on every device): (x, y, xv, yv, initial weights)."""
    g = torch.Generator().manual_seed(1234)
    d, o = config.inputs, config.outputs
    rows = config.micro_batch * config.micro_batches
    teacher = torch.randn(d, o, generator=g) / math.sqrt(d)
    x = torch.randn(rows, d, generator=g)
    y = x @ teacher + 0.1 * torch.randn(rows, o, generator=g)
    # Validation asks for a scaled-down teacher: its loss falls while the model learns,
    # then rises once the model overshoots, so early stopping fires.
    xv = torch.randn(config.val_rows, d, generator=g)
    yv = config.shift * (xv @ teacher)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        initial = [p.detach() for p in make_model(config).parameters()]
    return x, y, xv, yv, initial


def _host(config: Config) -> tuple:
    key = _data_key(config)
    if key not in _host_data:
        _host_data[key] = _make_host_data(config)
    return _host_data[key]


def prepare(device_type: str) -> None:
    """In the fork server, once: the host data of the sizes runs on this device type use,
    which every run process then inherits instead of making it again (hundreds of MB at
    the GPU sizes)."""
    _host(Config() if device_type == "cuda" else CPU_CONFIG)


class Data:
    """The host data of one run process, in host memory, pinned on a CUDA machine (so a
    copy with ``non_blocking=True`` runs on the copy engine beside compute)."""

    def __init__(self, config: Config, device: torch.device) -> None:
        x, y, xv, yv, initial = _host(config)
        if device.type == "cuda":
            x, y, xv, yv = (t.pin_memory() for t in (x, y, xv, yv))
        b, vb = config.micro_batch, config.val_batch
        rows = config.micro_batch * config.micro_batches
        self.device = device
        self.train = [(x[i : i + b], y[i : i + b]) for i in range(0, rows, b)]
        self.val = [(xv[i : i + vb], yv[i : i + vb]) for i in range(0, config.val_rows, vb)]
        self.val_elements = config.val_rows * config.outputs
        self._val_on_device = None
        self.initial = [p.to(device) for p in initial]

    def loss_over(self, weights: list[torch.Tensor], batches) -> torch.Tensor:
        """Mean squared error of the MLP with these weights over ``batches`` (device
        tensors), on the current stream, without synchronising."""
        total = None
        for x, y in batches:
            part = F.mse_loss(_mlp(weights, x), y, reduction="sum")
            total = part if total is None else total + part
        return total / self.val_elements

    def recompute(self, weights: list[torch.Tensor]) -> torch.Tensor:
        """The validation loss of ``weights`` over the real validation data (after the
        run: whatever the candidate's batches held)."""
        if self._val_on_device is None:
            self._val_on_device = [(x.to(self.device), y.to(self.device)) for x, y in self.val]
        return self.loss_over(weights, self._val_on_device)


def make_model(config: Config, device=None) -> torch.nn.Sequential:
    return torch.nn.Sequential(
        torch.nn.Linear(config.inputs, config.hidden, device=device),
        torch.nn.ReLU(),
        torch.nn.Linear(config.hidden, config.hidden, device=device),
        torch.nn.ReLU(),
        torch.nn.Linear(config.hidden, config.outputs, device=device),
    )


class Job:
    """What ``Trainer(job)`` receives; documented in starter.py."""

    def __init__(self, config: Config, device: torch.device, data: Data, recorder) -> None:
        self.config = config
        self.device = device
        self.model = make_model(config, device="meta").to_empty(device=device)
        with torch.no_grad():
            for parameter, value in zip(self.model.parameters(), data.initial, strict=True):
                parameter.copy_(value)
        recorder.watch_model(self.model)
        self.optimizer = CountingSGD(
            self.model.parameters(), recorder=recorder, lr=config.lr, momentum=config.momentum
        )
        self._data = data
        self._recorder = recorder
        self._train = host_batches(data.train, recorder)
        self._val = host_batches(data.val, recorder)

    def batches(self, epoch: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
        return list(self._train)

    def validation_batches(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        return list(self._val)

    def loss(self, outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.mse_loss(outputs, targets)

    def validate(self, batches) -> torch.Tensor:
        batches = _device_batches(batches, self._data, self.device)
        weights = [p.detach() for p in self.model.parameters()]
        return self._recorder.validate(
            weights,
            lambda w: self._data.loss_over(w, batches),
            recompute=self._data.recompute,
        )


def _device_batches(batches, data: Data, device: torch.device) -> list:
    """The validation batches ``job.validate`` was given, checked against the real ones
    (count, shapes, device) so a mistake gets a message instead of a wrong loss."""
    expected = len(data.val)
    try:
        batches = [(x, y) for x, y in batches]
    except (TypeError, ValueError):
        raise TypeError(
            "job.validate(batches) takes the validation batches as a list of (inputs, "
            "targets) pairs of tensors on the device"
        ) from None
    if len(batches) != expected:
        raise ValueError(
            f"job.validate got {len(batches)} batches; it needs all {expected} of "
            "job.validation_batches(), copied to the device, in order"
        )
    for (x, y), (hx, hy) in zip(batches, data.val, strict=True):
        if not isinstance(x, torch.Tensor) or not isinstance(y, torch.Tensor):
            raise TypeError("job.validate(batches): every batch is a pair of tensors")
        if x.shape != hx.shape or y.shape != hy.shape:
            raise ValueError(
                f"job.validate got a batch of shapes {tuple(x.shape)}, {tuple(y.shape)}; "
                f"the validation batches are {tuple(hx.shape)}, {tuple(hy.shape)}"
            )
        if x.device != device or y.device != device:
            raise ValueError(
                f"job.validate got a batch on {x.device}: copy the validation batches to "
                f"{device} first"
            )
    return batches


_data: dict[tuple, Data] = {}


def build(device, config: Config, recorder) -> Job:
    key = (str(device), config)
    if key not in _data:
        _data.clear()  # one device and one size at a time: keep the memory of one
        _data[key] = Data(config, torch.device(device))
    return Job(config, torch.device(device), _data[key], recorder)


def no_early_stop(config: Config) -> Config:
    return replace(config, patience=config.max_epochs + 1)


# -- the reference ------------------------------------------------------------------------


@dataclass
class Reference:
    epoch_weights: list[list[torch.Tensor]]  # end of every epoch (early stopping off)
    epoch_losses: list[float]
    stop_epoch: int
    weights: list[torch.Tensor]
    steps_per_epoch: int
    batches_per_epoch: int  # copies of an epoch: training and validation batches


def early_stop_epoch(losses: list[float], config: Config) -> tuple[int, float]:
    """The stopping epoch of the patience rule, and the smallest relative distance of a
    loss from the threshold it was compared with."""
    best, bad, margin = math.inf, 0, math.inf
    for epoch, loss in enumerate(losses):
        threshold = best - config.min_delta
        if best != math.inf:
            margin = min(margin, abs(loss - threshold) / abs(loss))
        if loss < threshold:
            best, bad = loss, 0
        else:
            bad += 1
        if bad >= config.patience:
            return epoch, margin
    return len(losses) - 1, margin


def reference(trajectory, run) -> Reference:
    config: Config = run.config
    weights = [v.weights for v in trajectory.recorder.validations]
    losses = [float(v.loss) for v in trajectory.recorder.validations]
    stop, margin = early_stop_epoch(losses, config)
    returned = run.returned
    if returned["stop_epoch"] != stop:
        raise ValueError(f"the starter stopped after epoch {returned['stop_epoch']}, not {stop}")
    if margin < DECISION_MARGIN:
        raise ValueError(f"an early-stopping decision is within {margin:.2g} of its threshold")
    for epoch in range(1, min(len(weights), stop + 2)):
        gap = max_difference(weights[epoch], weights[epoch - 1])
        if gap < SEPARATION:
            raise ValueError(f"epochs {epoch - 1} and {epoch} differ by only {gap:.2g}")
    per_epoch = config.micro_batches + config.validation_batches
    return Reference(
        weights, losses, stop, list(returned["weights"]), config.steps_per_epoch, per_epoch
    )


# -- checks -------------------------------------------------------------------------------


def _returned(value) -> tuple[int | None, list | None, list | None, str | None]:
    """(stop_epoch, weights, losses, problem) from what train() returned."""
    expected = 'train() must return {"stop_epoch": int, "weights": [tensors], "losses": [floats]}'
    if not isinstance(value, dict) or not {"stop_epoch", "weights", "losses"} <= set(value):
        return None, None, None, f"{expected}; it returned {type(value).__name__}."
    stop = value["stop_epoch"]
    if isinstance(stop, torch.Tensor) and stop.numel() == 1:
        stop = int(stop.item())
    weights = value["weights"]
    if isinstance(weights, dict):
        weights = list(weights.values())
    if not isinstance(stop, int) or not isinstance(weights, list | tuple):
        return None, None, None, f"{expected}."
    if not all(isinstance(w, torch.Tensor) for w in weights):
        return None, None, None, f"{expected}: the weights must be tensors."
    try:
        losses = [float(x) for x in value["losses"]]
    except (TypeError, ValueError):
        return None, None, None, f"{expected}: the losses must be numbers."
    return stop, list(weights), losses, None


def _nearest_epoch(weights, epochs, guess: int) -> tuple[int, float]:
    """The epoch whose end-of-epoch weights these are (trying the likeliest first)."""
    best, best_gap = 0, math.inf
    for epoch in sorted(range(len(epochs)), key=lambda e: abs(e - guess)):
        gap = max_difference(weights, epochs[epoch])
        if gap < best_gap:
            best, best_gap = epoch, gap
        if gap <= WEIGHT_ATOL:
            break
    return best, best_gap


def _close(a: float, b: float, rtol: float) -> bool:
    return abs(a - b) <= rtol * max(abs(b), 1e-12)


def _validation_problem(run, ref: Reference) -> tuple[str | None, int]:
    seen = set()
    for number, record in enumerate(run.recorder.validations, 1):
        epoch, gap = _nearest_epoch(record.weights, ref.epoch_weights, number - 1)
        if gap > WEIGHT_ATOL:
            return (
                f"Validation pass {number} read weights that are no epoch's end of the "
                f"sequential run (they differ by {gap:.2g} from the nearest, epoch {epoch}): "
                "training went wrong before it. Usually a micro-batch was trained on before "
                "its copy to the device had finished (the compute stream must `wait_stream` "
                "or `wait_event` for the copy stream), or its device memory was reused by a "
                "later copy while training still read it (`record_stream` on the compute "
                "stream, or keep it referenced); or the pass ran before the epoch's last "
                "optimizer step.",
                len(seen),
            )
        if seen and epoch <= max(seen):
            return (
                f"Validation pass {number} read the weights of epoch {epoch}, which an earlier "
                "pass had already validated: it ran before that epoch's training, or on a "
                "stream that had not waited for it.",
                len(seen),
            )
        got = float(record.loss)
        want = float(record.recomputed)  # recomputed by the run's process after the run
        if not _close(got, want, RECOMPUTE_RTOL):
            return (
                f"Validation pass {number} (epoch {epoch}) returned loss {got:.6g}, but the "
                f"weights it read give {want:.6g} on the real validation data: the batches "
                "it was given were not what the host holds. A validation batch was read "
                "before its copy had landed (wait for the copy stream), or its memory was "
                "overwritten while the pass read it (`record_stream`), or the weights "
                "changed while it ran.",
                len(seen),
            )
        seen.add(epoch)
    missing = [e for e in range(ref.stop_epoch + 1) if e not in seen]
    if missing:
        return (
            f"Epoch {missing[0]} was never validated through `job.validate` (epochs "
            f"0-{ref.stop_epoch} must be).",
            len(seen),
        )
    return None, len(seen)


def check(run, ref: Reference) -> list[Check]:
    config: Config = run.config
    stop = ref.stop_epoch
    checks = []

    problem, validated = _validation_problem(run, ref)
    checks.append(
        Check.verdict(
            "validation",
            problem is None,
            f"Every validation pass read the sequential run's end-of-epoch weights and "
            f"every validation batch as the host holds it ({validated} epochs validated).",
            problem or "",
        )
    )
    if problem is not None:
        why = "Not judged: validation read wrong weights, so the decisions built on it are too."
        for name in ("losses", "stop_epoch", "final_weights", "wasted_work"):
            checks.append(Check(name, "skip", why))
        return checks

    got_stop, weights, losses, shape = _returned(run.returned)
    if shape is not None:
        checks += [Check.fail(name, shape) for name in ("losses", "stop_epoch", "final_weights")]
    else:
        problem = None
        if len(losses) != got_stop + 1:
            problem = (
                f"train() returned {len(losses)} losses for epochs 0-{got_stop}: one per "
                "epoch up to the stopping one."
            )
        for epoch, (a, b) in enumerate(zip(losses, ref.epoch_losses, strict=False)):
            if problem is None and not _close(a, b, LOSS_RTOL):
                problem = (
                    f"The loss returned for epoch {epoch} is {a:.6g}; the sequential run's is "
                    f"{b:.6g}. Read a loss only once the validation stream has produced it "
                    "(after its CUDA event, or once its copy to pinned memory has landed)."
                )
        checks.append(
            Check.verdict(
                "losses",
                problem is None,
                f"The {len(losses)} losses equal the sequential run's.",
                problem or "",
            )
        )
        checks.append(
            Check.verdict(
                "stop_epoch",
                got_stop == stop,
                f"Training stopped after epoch {stop}, as the patience rule says.",
                f"train() says training stopped after epoch {got_stop}; the patience rule "
                f"(patience {config.patience}, min_delta {config.min_delta:g}) stops it after "
                f"epoch {stop}.",
            )
        )
        gap = max_difference(weights, ref.weights)
        checks.append(
            Check.verdict(
                "final_weights",
                gap <= WEIGHT_ATOL,
                f"The returned weights equal the sequential run's (largest difference {gap:.2g}).",
                "The returned weights differ from the sequential run's at epoch "
                f"{stop} by up to {gap:.3g} (tolerance {WEIGHT_ATOL:g}): return the snapshot "
                "of the stopping epoch.",
            )
        )

    steps, per_epoch = run.recorder.steps, ref.steps_per_epoch
    low, high = (stop + 1) * per_epoch, (stop + 2) * per_epoch
    if steps < low:
        problem = (
            f"Only {steps} optimizer steps were made; epochs 0-{stop} need {low} "
            f"({per_epoch} per epoch)."
        )
    elif steps > high:
        problem = (
            f"{steps} optimizer steps were made: training ran {steps / per_epoch - stop - 1:.1f} "
            f"epochs past epoch {stop}, where at most one may overlap the last validation. "
            "Wait for a validation result before running further ahead."
        )
    else:
        problem = None
    checks.append(
        Check.verdict(
            "wasted_work",
            problem is None,
            f"{steps} optimizer steps: epochs 0-{stop}, and at most one more.",
            problem or "",
        )
    )
    return checks


# -- timing -----------------------------------------------------------------------------


def _train_epoch(job: Job, batches) -> None:
    steps = job.config.accumulation_steps
    for i, (x, y) in enumerate(batches):
        (job.loss(job.model(x), y) / steps).backward()
        if (i + 1) % steps == 0:
            job.optimizer.step()
            job.optimizer.zero_grad()


def components(job: Job) -> dict:
    """The two resources of an epoch, each timed alone: the copy engine (every training
    and validation batch of one epoch copied to the device, back to back) and the SMs
    (one epoch's training and its validation on batches already there); and the epoch
    done serially with nothing for the host to wait for: each batch copied without
    blocking on the compute stream, then trained on, so the device copies and computes
    in turn while the host queues ahead (the zero point of overlap)."""
    data, device = job._data, job.device
    on_device = [(x.to(device), y.to(device)) for x, y in data.train]  # made untimed
    val_on_device = [(x.to(device), y.to(device)) for x, y in data.val]
    host = [*data.train, *data.val]

    def copy_epoch() -> None:
        for x, y in host:
            x.to(device, non_blocking=True)
            y.to(device, non_blocking=True)

    def compute_epoch() -> None:
        _train_epoch(job, on_device)
        with torch.no_grad():
            job.validate(val_on_device)

    def serial_epoch() -> None:
        batches = [(x.to(device, non_blocking=True), y.to(device, non_blocking=True))
                   for x, y in data.train]  # fmt: skip
        _train_epoch(job, batches)
        val = [(x.to(device, non_blocking=True), y.to(device, non_blocking=True))
               for x, y in data.val]  # fmt: skip
        with torch.no_grad():
            job.validate(val)

    return {"copy_epoch": copy_epoch, "compute_epoch": compute_epoch,
            "serial_epoch": serial_epoch}  # fmt: skip


def best_time(ref: Reference, seconds: dict[str, float]) -> float:
    """Epochs 0..S each need their copies (on the copy engine) and their compute (on the
    SMs): at best the larger of the two runs back to back, with the smaller one hidden
    under it, except one batch's worth (the first batch's copy cannot overlap anything).
    No correct program can be faster, however well it overlaps."""
    copy, compute = seconds["copy_epoch"], seconds["compute_epoch"]
    per_epoch = ref.batches_per_epoch
    return (ref.stop_epoch + 1) * max(copy, compute) + min(copy, compute) / per_epoch


def serial_time(ref: Reference, seconds: dict[str, float]) -> float:
    """Epochs 0..S done serially on the device, with no host waits: what removing the
    starter's blocking copies gains without overlapping anything."""
    return (ref.stop_epoch + 1) * seconds["serial_epoch"]


def work(run) -> dict[str, int]:
    return {
        "optimizer steps": run.recorder.steps,
        "validation passes": len(run.recorder.validations),
    }


EXERCISE = GpuExercise(
    build=build,
    check=check,
    reference=reference,
    no_early_stop=no_early_stop,
    components=components,
    best_time=best_time,
    serial_time=serial_time,
    work=work,
    config=Config(),
    cpu_config=CPU_CONFIG,
    target_overlap=0.5,
    prepare=prepare,
    bound_note=(
        "the copies or the compute of epochs 0..S, whichever takes longer, back to back, "
        "plus one batch: one epoch's copies and one epoch's compute each timed alone by "
        "the harness"
    ),
)
