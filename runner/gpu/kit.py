"""The harness side of a GPU exercise's job: what the candidate's work goes through.

A GPU exercise hands the candidate real PyTorch objects (a model, an optimizer, data on
the device). The few calls that matter for grading go through a :class:`Recorder`:

- :class:`CountingSGD` counts optimizer steps (and, when traced, marks them on the
  stream they ran on);
- :meth:`Recorder.validate` runs a validation pass on the *current* stream, keeps a copy
  of the weights it started from (taken on that same stream, so it is exactly what the
  pass read first) and the loss it returned, so checks can ask "which epoch's weights
  did this validation see, and did they change while it ran?";
- :func:`host_batches` wraps a job's host-memory batches so that every copy of one to
  the device goes through the recorder (:class:`HostTensor`): marked on the timeline as
  a ``copy`` on the stream it ran on, and delayed when races are amplified;
- :meth:`Recorder.watch_model` marks each forward and backward pass of the job's model
  (a ``train`` span per micro-batch on the stream it ran on).

Nothing here synchronises the host with the device. Timeline marks are CUDA events
(perf_counter values on a CPU), converted to seconds only after the run, once the whole
device has been synchronised.

**Race amplification** (CUDA only, the checked run only): the recorder puts a
``torch.cuda._sleep`` on the current stream before every optimizer step, at the start of
every validation pass that runs on a side stream, and, alternating by epoch, before every
copy of a host batch (even epochs: a reader that does not wait for the copy reads memory
the copy has not written yet) or before every forward pass (odd epochs: a copy that
reuses memory the compute stream still has to read overwrites it first). A correct
program waits for what it depends on, so the sleeps only cost it time; a program that
reads data before it has landed (no ``wait_stream``/``wait_event``), reads live weights,
or lets memory be reused while another stream still reads it (no ``record_stream``) then
reads the wrong values every time instead of once in a while. This is the GPU
counterpart of the simulated engine's seeded shuffles.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

TRAINING_LANE = "training stream"


@dataclass(frozen=True)
class Amplifier:
    """Sleeps on the current stream (GPU cycles), see the module docstring."""

    step_cycles: int
    validate_cycles: int
    copy_cycles: int = 0  # before each copy of a host batch, in even epochs
    compute_cycles: int = 0  # before each forward pass, in odd epochs

    def sleep(self, cycles: int) -> None:
        if cycles > 0:
            torch.cuda._sleep(int(cycles))


def sleep_cycles_per_second(device) -> float:
    """How many ``torch.cuda._sleep`` cycles make one second on this GPU (measured)."""
    probe = 2_000_000
    torch.cuda.synchronize(device)
    torch.cuda._sleep(probe)  # warm-up
    begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    begin.record()
    torch.cuda._sleep(probe * 5)
    end.record()
    end.synchronize()
    seconds = begin.elapsed_time(end) / 1000.0
    return probe * 5 / seconds if seconds > 0 else 1e9


@dataclass
class Validation:
    """One validation pass, as the harness saw it."""

    weights: list[torch.Tensor]  # copied on the pass's stream when it started
    loss: torch.Tensor  # the 0-d loss the pass returned (on the device)
    lane: str
    start: Any = None  # marks, when traced
    end: Any = None
    compute: Callable[[list[torch.Tensor]], torch.Tensor] | None = None  # to recompute it
    recompute: Callable[[list[torch.Tensor]], torch.Tensor] | None = None  # on trusted data


@dataclass
class _Span:
    lane: str
    op: str
    start: Any
    end: Any
    label: str | None = None


@dataclass
class Recorder:
    """What the harness saw of one run (see the module docstring)."""

    device: torch.device
    traced: bool = False
    amplifier: Amplifier | None = None
    steps: int = 0
    validations: list[Validation] = field(default_factory=list)
    spans: list[_Span] = field(default_factory=list)
    _cuda: bool = False
    _origin: Any = None
    _training_stream: int | None = None
    _lanes: dict[int, str] = field(default_factory=dict)
    _window: Any = None
    _end: Any = None
    _batches: int = 0
    copies: int = 0

    def __post_init__(self) -> None:
        self.device = torch.device(self.device)
        self._cuda = self.device.type == "cuda"

    # -- streams and marks --------------------------------------------------------

    def begin(self) -> None:
        """Called by the harness just before ``train()``: the current stream is the
        training stream, and (traced) the timeline starts here."""
        if self._cuda:
            self._training_stream = torch.cuda.current_stream(self.device).stream_id
        if self.traced:
            self._origin = self._mark()

    def lane(self) -> str:
        """The timeline lane of the current stream."""
        if not self._cuda:
            return TRAINING_LANE
        stream = torch.cuda.current_stream(self.device).stream_id
        if stream == self._training_stream:
            return TRAINING_LANE
        if stream not in self._lanes:
            self._lanes[stream] = f"side stream {len(self._lanes) + 1}"
        return self._lanes[stream]

    def _mark(self) -> Any:
        if self._cuda:
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            return event
        return time.perf_counter()

    def _seconds(self, mark: Any) -> float:
        if self._cuda:
            return self._origin.elapsed_time(mark) / 1000.0
        return mark - self._origin

    # -- what the job calls -----------------------------------------------------------

    def watch_model(self, model: torch.nn.Module) -> None:
        """Mark every micro-batch's forward and backward pass of ``model``: a forward
        pre-hook opens the span (and, amplified in odd epochs, sleeps first), the
        gradient of the first parameter, the last one backward computes, closes it."""
        model.register_forward_pre_hook(self.forward_hook)
        first = next(model.parameters(), None)
        if first is not None and first.requires_grad:
            first.register_post_accumulate_grad_hook(self.backward_done)

    def forward_hook(self, module, args) -> None:
        amplifier = self.amplifier
        if amplifier is not None and len(self.validations) % 2 == 1:
            amplifier.sleep(amplifier.compute_cycles)
        if self.traced:
            self._window = (self.lane(), self._mark())

    def backward_done(self, parameter) -> None:
        self._batches += 1
        if self.traced and self._window is not None:
            lane, start = self._window
            label = f"{self._batches}"
            self.spans.append(_Span(lane, "train", start, self._mark(), label))
            self._window = None

    def before_copy(self) -> Any:
        """Before a host batch is copied to the device on the current stream."""
        amplifier = self.amplifier
        if amplifier is not None and len(self.validations) % 2 == 0:
            amplifier.sleep(amplifier.copy_cycles)
        return self._mark() if self.traced else None

    def after_copy(self, start: Any) -> None:
        self.copies += 1
        if self.traced and start is not None:
            self.spans.append(_Span(self.lane(), "copy", start, self._mark(), f"{self.copies}"))

    def before_step(self) -> None:
        if self.amplifier is not None:
            self.amplifier.sleep(self.amplifier.step_cycles)

    def after_step(self) -> None:
        self.steps += 1

    def validate(
        self,
        weights: list[torch.Tensor],
        compute: Callable[[list[torch.Tensor]], torch.Tensor],
        recompute: Callable[[list[torch.Tensor]], torch.Tensor] | None = None,
    ) -> torch.Tensor:
        """Run ``compute(weights)`` on the current stream and record it; ``recompute``
        (default ``compute``) recomputes its loss after the run from the weights it
        read, on data the candidate's copies did not make."""
        lane = self.lane()
        start = self._mark() if self.traced else None
        with torch.no_grad():
            seen = [w.detach().clone() for w in weights]
            if self.amplifier is not None and lane != TRAINING_LANE:
                self.amplifier.sleep(self.amplifier.validate_cycles)
            loss = compute(list(weights))
        end = self._mark() if self.traced else None
        record = Validation(seen, loss, lane, start, end, compute, recompute or compute)
        self.validations.append(record)
        if self.traced:
            number = len(self.validations)
            self.spans.append(_Span(lane, "validate", start, end, f"validation {number}"))
        return loss

    # -- after the run ----------------------------------------------------------------

    def finish(self) -> None:
        """Called by the harness once ``train()`` has returned and the whole device has
        been synchronised: the end of the timeline."""
        if self.traced and self._origin is not None:
            self._end = self._mark()
            if self._cuda:
                self._end.synchronize()

    def trace_json(self, limit: int) -> dict | None:
        """The timeline in the result's trace format, or None when not traced."""
        if not self.traced or self._origin is None or self._end is None:
            return None
        lanes = [TRAINING_LANE, *self._lanes.values()]
        spans = []
        for span in self.spans[:limit]:
            item = {
                "lane": span.lane,
                "op": span.op,
                "start": round(self._seconds(span.start), 6),
                "end": round(self._seconds(span.end), 6),
            }
            if span.label:
                item["batch"] = span.label
            spans.append(item)
        return {
            "lanes": lanes,
            "makespan": round(self._seconds(self._end), 6),
            "truncated": max(0, len(self.spans) - limit),
            "spans": spans,
        }


# -- host batches -----------------------------------------------------------------------

_VIEWS = frozenset(
    name
    for name in (
        "__getitem__", "narrow", "view", "reshape", "split", "chunk", "unbind", "flatten",
        "contiguous", "detach", "pin_memory", "t", "transpose", "view_as", "reshape_as",
        "tensor_split", "unflatten", "squeeze", "unsqueeze", "expand", "select",
    )
)  # fmt: skip


class HostTensor(torch.Tensor):
    """A view of a job's batch in host memory. Copying it to the device (``.to``,
    ``.cuda``, ``copy_``, ``torch.as_tensor``...) goes through the run's recorder: a
    ``copy`` span on the stream it ran on, and the amplifier's sleep before it. Views of
    it (slices, reshapes) stay host tensors; anything else it computes is a plain tensor,
    so nothing else in a run pays for the wrapper."""

    recorder: Recorder | None = None  # the run's (one run per process)

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        recorder = HostTensor.recorder
        transfer = recorder is not None and _targets_cuda(func, args, kwargs)
        start = recorder.before_copy() if transfer else None
        with torch._C.DisableTorchFunctionSubclass():
            result = func(*args, **kwargs)
        if transfer:
            recorder.after_copy(start)
        keep = getattr(func, "__name__", "") in _VIEWS
        return _wrapped(result, keep)


def _wrapped(value, keep: bool):
    if isinstance(value, torch.Tensor):
        if keep and value.device.type == "cpu":
            return value.as_subclass(HostTensor) if type(value) is not HostTensor else value
        return value.as_subclass(torch.Tensor) if type(value) is not torch.Tensor else value
    if isinstance(value, tuple | list):
        return type(value)(_wrapped(v, keep) for v in value)
    return value


def _is_cuda(value) -> bool:
    if isinstance(value, torch.device):
        return value.type == "cuda"
    if isinstance(value, str):
        return value.startswith("cuda")
    if isinstance(value, torch.Tensor):
        return value.is_cuda
    return isinstance(value, int) and not isinstance(value, bool)  # a device index


def _targets_cuda(func, args, kwargs) -> bool:
    """Whether this call copies a host tensor to a CUDA device (decided before it runs,
    so the amplifier's sleep goes first on its stream)."""
    name = getattr(func, "__name__", "")
    if name == "cuda":
        return True
    if name == "copy_":
        return bool(args) and isinstance(args[0], torch.Tensor) and args[0].is_cuda
    if name in ("to", "type"):
        return any(_is_cuda(a) for a in args[1:]) or _is_cuda(kwargs.get("device"))
    if name in ("as_tensor", "asarray", "tensor"):
        return _is_cuda(kwargs.get("device"))
    return False


def host_batches(batches, recorder: Recorder) -> list[tuple[torch.Tensor, ...]]:
    """A job's host batches as :class:`HostTensor` views, copies watched by ``recorder``."""
    HostTensor.recorder = recorder
    return [tuple(t.as_subclass(HostTensor) for t in batch) for batch in batches]


class CountingSGD(torch.optim.SGD):
    """``torch.optim.SGD`` whose steps the harness counts (and amplifies, see above)."""

    def __init__(self, params, *, recorder: Recorder, **options) -> None:
        super().__init__(params, **options)
        self._recorder = recorder

    def step(self, closure=None):
        self._recorder.before_step()
        result = super().step(closure)
        self._recorder.after_step()
        return result


# -- comparing weights ------------------------------------------------------------


def max_difference(a: list[torch.Tensor], b: list[torch.Tensor]) -> float:
    """The largest absolute difference between two lists of tensors (inf if the shapes
    differ). Synchronises: call it after the run."""
    if len(a) != len(b) or any(x.shape != y.shape for x, y in zip(a, b, strict=True)):
        return float("inf")
    return max(
        (
            float((x.detach() - y.detach().to(x.device)).abs().max())
            for x, y in zip(a, b, strict=True)
        ),
        default=0.0,
    )


# -- what a run process sends back ------------------------------------------------------

SAMPLE_LIMIT = 65_536  # elements of one validation's weights sent back in full


def sample_positions(weights: list[torch.Tensor], limit: int = SAMPLE_LIMIT) -> list[torch.Tensor]:
    """The weights a validation read, as sent back to the grader: all of them when they
    are small (every CPU size), else each tensor's values at fixed, evenly spread
    positions (``limit`` in all), flattened. The reference's epochs are sampled the same
    way, so the two compare element for element."""
    total = sum(w.numel() for w in weights)
    if total <= limit:
        return [w.detach() for w in weights]
    picked = []
    for w in weights:
        flat = w.detach().reshape(-1)
        count = max(1, flat.numel() * limit // total)
        step = max(1, flat.numel() // count)
        picked.append(flat[::step][:count])
    return picked


class _StandInStream:
    created = 0

    def __init__(self, device=None, priority=0, **kwargs):
        _StandInStream.created += 1
        self.stream_id = _StandInStream.created
        self.priority = priority

    def wait_stream(self, other):
        pass

    def wait_event(self, event):
        pass

    def record_event(self, event=None):
        return event or _StandInEvent()

    def query(self):
        return True

    def synchronize(self):
        pass


class _StandInEvent:
    def __init__(self, enable_timing=False, blocking=False, interprocess=False):
        pass

    def record(self, stream=None):
        pass

    def wait(self, stream=None):
        pass

    def query(self):
        return True

    def synchronize(self):
        pass


def cpu_stream_stand_ins() -> None:
    """On a CPU (tests): torch.cuda's stream API as no-ops, so a candidate's stream code
    runs there (every operation is already in order on a CPU). Only ever called in a
    run process, never in the grader."""
    import contextlib

    default = _StandInStream()
    torch.cuda.Stream = _StandInStream
    torch.cuda.Event = _StandInEvent
    torch.cuda.current_stream = lambda device=None: default
    torch.cuda.stream = lambda stream: contextlib.nullcontext()
    torch.Tensor.record_stream = lambda self, stream: None
    torch.cuda.synchronize = lambda device=None: None
