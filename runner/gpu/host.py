"""The grader's side of the GPU track's run processes (``runner.gpu.worker``).

The grading process never executes a candidate's code: it asks the fork server for one
child per run, talks to it through one socket (``runner.protocol.Channel`` frames, with a
deadline on every wait and a size limit on every frame), and reads what comes back as
untrusted input (:mod:`runner.gpu.wire`). Anything malformed, late or missing ends the
run as :class:`RunBroke`; the grader turns that into the candidate's failure.
"""

from __future__ import annotations

import contextlib
import math
import os
import secrets
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from runner import forkserver
from runner.gpu import wire
from runner.protocol import Channel, ProtocolError
from runner.result import OUTPUT_LIMIT, TRACE_LIMIT, clip

RUNNER_PARENT = Path(__file__).resolve().parents[2]  # the folder holding runner/
SMALL_FRAME = 1 << 20
COMMIT_FRAME = 4 << 20
MAX_VALIDATIONS = 1024
MAX_SYNCS = 2000
TEXT = 200


class RunBroke(Exception):
    """A run process that did not follow the conversation: ``why`` is timeout | protocol
    | died."""

    def __init__(self, why: str, message: str) -> None:
        super().__init__(message)
        self.why = why


class Server(forkserver.Client):
    """``python -m runner.gpu.worker``: forks one fresh process per run."""

    name = "GPU fork server"

    def __init__(self, exercise_dir: Path, device_type: str = "cuda") -> None:
        env = dict(os.environ)
        env.update(
            OVERLAP_DEVICE_TYPE=device_type,  # what the exercise's prepare() makes ready
            PYTHONHASHSEED="0",
            PYTHONPATH=str(RUNNER_PARENT),
            PYTHONDONTWRITEBYTECODE="1",
            # cuBLAS is bitwise deterministic across streams only with a fixed workspace
            CUBLAS_WORKSPACE_CONFIG=os.environ.get("CUBLAS_WORKSPACE_CONFIG", ":4096:8"),
        )
        # The exercise goes before the control descriptor the base class appends.
        super().__init__(["-m", "runner.gpu.worker", "--exercise", str(exercise_dir)], env)

    def reap(self, pid: int) -> dict:
        return self.ask({"op": "reap", "pid": pid})

    def close(self) -> None:
        super().close(timeout=5)


_servers: dict[tuple[Path, str], Server] = {}


def server(exercise_dir: Path, device_type: str = "cuda") -> Server:
    """One fork server per exercise, device type and grader process (restarted if it
    died)."""
    key = (Path(exercise_dir).resolve(), device_type)
    found = _servers.get(key)
    if found is None or not found.alive():
        found = _servers[key] = Server(key[0], device_type)
    return found


class _Deadline:
    """A socket whose reads all share one deadline (a trickling sender cannot stretch
    it): what ``Channel`` reads through."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.deadline = math.inf

    def recv(self, count: int) -> bytes:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        self.sock.settimeout(left if math.isfinite(left) else None)
        return self.sock.recv(count)

    def sendall(self, data: bytes) -> None:
        self.sock.settimeout(30)
        self.sock.sendall(data)


class RunProcess:
    """One child, one conversation (see runner/gpu/worker.py)."""

    def __init__(self, exercise_dir: Path, spec: dict, *, cpu_s: int) -> None:
        device = str(spec.get("device", "cuda"))
        self.server = server(exercise_dir, "cpu" if device.startswith("cpu") else "cuda")
        self.pid, self.sock = self.server.fork({"cpu_s": cpu_s})
        self.wire = _Deadline(self.sock)
        self.channel = Channel(self.wire, max_frame=SMALL_FRAME)
        self.seed = secrets.randbits(48)
        self.closed = False
        self.channel.send(spec)

    def receive(self, seconds: float, max_frame: int, ops: tuple[str, ...]) -> dict:
        self.wire.deadline = time.monotonic() + seconds
        self.channel.max_frame = max_frame
        try:
            message = self.channel.recv()
        except TimeoutError:
            raise RunBroke("timeout", f"no answer within {seconds:.0f} s") from None
        except (EOFError, ConnectionError, OSError):
            raise RunBroke("died", "its process ended before it reported") from None
        except ProtocolError as exc:
            raise RunBroke("protocol", str(exc)) from None
        if message.get("op") not in ops:
            op = str(message.get("op"))[:40]
            raise RunBroke("protocol", f"an unexpected message (op {op!r})")
        return message

    def go(self) -> None:
        self.channel.send({"op": "go", "seed": self.seed})

    def close(self) -> dict:
        if self.closed:
            return {}
        self.closed = True
        try:
            return self.server.reap(self.pid)  # its whole session, and what it left behind
        except forkserver.ServerGone:  # the run stopped or killed its server
            forkserver.kill_session(self.pid)
            return {"server_gone": True}
        finally:
            with contextlib.suppress(OSError):
                self.sock.close()


# -- what a run reports, decoded ------------------------------------------------------


@dataclass
class ReportedValidation:
    """One validation pass as the run process reported it (forgeable)."""

    weights: list[torch.Tensor]  # what it read (sampled, see kit.sample_positions)
    loss: float  # what it returned
    recomputed: float  # the same validation recomputed on those weights after the run
    lane: str


@dataclass
class RunRecord:
    """The recorder's counts, as the run process reported them (forgeable)."""

    device: torch.device
    steps: int = 0
    validations: list[ReportedValidation] = field(default_factory=list)


def decode_failure(message: dict) -> tuple[str, str, str | None, int | None]:
    try:
        verdict = message["verdict"]
        if verdict not in ("runtime_error", "missing_entry_point"):
            raise wire.WireError("a failure with an unknown verdict")
        text = wire.string(message["message"], 4000)
        trace = message.get("traceback")
        trace = None if trace is None else wire.string(trace, 20_000)
        line = message.get("line")
        line = None if line is None else wire.integer(line, 0, 10**7)
        return verdict, text, trace, line
    except (KeyError, TypeError, wire.WireError) as exc:
        raise RunBroke("protocol", f"a malformed failure report ({exc})") from None


def output_of(message: dict) -> tuple[str, str]:
    texts = []
    for key in ("stdout", "stderr"):
        value = message.get(key, "")
        if not isinstance(value, str):
            raise RunBroke("protocol", f"its {key} is not text")
        texts.append(clip(value, OUTPUT_LIMIT))
    return texts[0], texts[1]


@dataclass
class Report:
    returned: object
    seconds: float
    steps: int
    validations: list[ReportedValidation]
    syncs: list[tuple[int, int, str]]
    precision_changed: bool
    trace: dict | None
    stdout: str
    stderr: str


def decode_report(
    message: dict, commit, seed: int, *, tensor_bytes: int, sampled: list[tuple] | None
) -> Report:
    """The report, checked field by field; ``sampled``: the shapes every validation's
    weights must have (None for the starter's runs, which set them)."""
    try:
        wire.verify_commit(commit, message["returned"], seed)
        returned = wire.decode(message["returned"], wire.Budget(tensor_bytes))
        seconds = wire.number(message["seconds"], finite=True)
        if seconds < 0:
            raise wire.WireError("a negative time")
        steps = wire.integer(message["steps"], 0, 10**7)
        raw = message["validations"]
        if not isinstance(raw, list) or len(raw) > MAX_VALIDATIONS:
            raise wire.WireError("validations that are not a short list")
        budget = wire.Budget(
            len(raw) * sum(8 * math.prod(s) for s in sampled) if sampled else 1 << 31
        )
        validations = []
        for item in raw:
            if not isinstance(item, dict) or not isinstance(item.get("weights"), list):
                raise wire.WireError("a validation record of the wrong shape")
            if sampled is not None and len(item["weights"]) != len(sampled):
                raise wire.WireError("a validation that read the wrong number of tensors")
            weights = [
                wire.decode_tensor(w, budget, None if sampled is None else sampled[i])
                for i, w in enumerate(item["weights"])
            ]
            validations.append(
                ReportedValidation(
                    weights,
                    wire.number(item["loss"]),
                    wire.number(item["recomputed"]),
                    wire.string(item["lane"], TEXT),
                )
            )
        syncs_raw = message["syncs"]
        if not isinstance(syncs_raw, list) or len(syncs_raw) > MAX_SYNCS:
            raise wire.WireError("syncs that are not a short list")
        syncs = []
        for item in syncs_raw:
            if not isinstance(item, list) or len(item) != 3:
                raise wire.WireError("a sync record of the wrong shape")
            line, at, text = item
            syncs.append(
                (
                    wire.integer(line, 1, 10**7),
                    wire.integer(at, 0, 10**7),
                    wire.string(text, TEXT),
                )
            )
        changed = message["precision_changed"]
        if not isinstance(changed, bool):
            raise wire.WireError("precision_changed is not a boolean")
        trace = sanitize_trace(message["trace"])
    except (KeyError, TypeError, ValueError, wire.WireError) as exc:
        raise RunBroke("protocol", f"a malformed report ({exc})") from None
    stdout, stderr = output_of(message)
    return Report(returned, seconds, steps, validations, syncs, changed, trace, stdout, stderr)


def sanitize_trace(value) -> dict | None:
    """A timeline from the run process, rebuilt from checked fields (it is only shown)."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise wire.WireError("a trace that is not an object")
    lanes = value.get("lanes")
    if not isinstance(lanes, list) or not 1 <= len(lanes) <= 16:
        raise wire.WireError("trace lanes that are not a short list")
    lanes = [wire.string(lane, 60) for lane in lanes]
    spans_raw = value.get("spans")
    if not isinstance(spans_raw, list) or len(spans_raw) > TRACE_LIMIT:
        raise wire.WireError("trace spans that are not a bounded list")
    spans = []
    for span in spans_raw:
        if not isinstance(span, dict) or span.get("lane") not in lanes:
            raise wire.WireError("a trace span on no lane")
        item = {
            "lane": span["lane"],
            "op": wire.string(span.get("op"), 20),
            "start": wire.number(span.get("start"), finite=True),
            "end": wire.number(span.get("end"), finite=True),
        }
        if "batch" in span:
            item["batch"] = wire.string(span["batch"], 60)
        spans.append(item)
    return {
        "lanes": lanes,
        "makespan": wire.number(value.get("makespan"), finite=True),
        "truncated": wire.integer(value.get("truncated"), 0, 10**9),
        "spans": spans,
    }


def decode_components(message: dict, trials: int) -> tuple[dict, str]:
    """{name: [seconds]} and the device's name, from the (trusted) components process."""
    try:
        seconds = message["seconds"]
        if not isinstance(seconds, dict) or not 1 <= len(seconds) <= 16:
            raise wire.WireError("components that are not a small object")
        out = {}
        for name, values in seconds.items():
            if not isinstance(values, list) or len(values) != trials:
                raise wire.WireError(f"{trials} times expected for {name}")
            out[wire.string(name, 60)] = [wire.number(v, finite=True) for v in values]
        return out, wire.string(message["device_name"], TEXT)
    except (KeyError, TypeError, wire.WireError) as exc:
        raise RunBroke("protocol", f"a malformed components report ({exc})") from None
