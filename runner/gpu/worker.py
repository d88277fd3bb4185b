"""The GPU track's run processes: ``python -m runner.gpu.worker --exercise <folder> <fd>``.

The trusted grader (``runner.gpu.grading`` through ``runner.gpu.host``) starts this fork
server once per exercise: a fresh interpreter that imports torch and the exercise's
grader module and never initialises CUDA (a CUDA context does not survive ``fork``) and
never runs a tensor operation (no thread pools to inherit). For every run it forks one
child; the child is the only process that ever executes code from a candidate's file.

The child, before anything else: its own session, death with this server, the OOM
killer's first choice, ``RLIMIT_CPU``, ``RLIMIT_FSIZE`` 0 (it can write no file, so no
answer survives into a later run), standard streams on /dev/null and no descriptor but
its socket. This server is non-dumpable (so are its children, by inheritance): a child
cannot ptrace it or read its ``/proc`` files; and it is a child subreaper, so anything a
run starts (even a double-forked daemon in its own session) is reparented here and
killed when the run is reaped.

One conversation per child (frames of ``runner.protocol.Channel``):

```
 grader                                     child
 {kind, code, device, phase, ...}  ──▶      CUDA start-up, data, trusted warm-up
                                   ◀──      {op: ready}
 {op: go, seed}   ── the grader's clock starts ──
                                            exec the file, build the job, Trainer(job).train(),
                                            synchronise the device, sample the returned tensors
                                   ◀──      {op: trained, commit}   ── the clock stops
                                   ◀──      {op: report, ...} (full tensors, records, output)
```

The commitment: small returned values in full, and for every large returned tensor its
values at positions drawn from the seed sent with ``go``. The full tensors, sent after
the clock stops, must equal it there: a run cannot answer before its weights exist.
"""

from __future__ import annotations

import asyncio
import inspect
import linecache
import os
import random
import resource
import signal
import socket
import sys
import warnings
from contextlib import contextmanager

warnings.filterwarnings("ignore", message="Failed to initialize NumPy")

import torch  # noqa: E402

from runner import forkserver, privileges  # noqa: E402
from runner.exercise import load  # noqa: E402
from runner.forkserver import (  # noqa: E402
    PR_SET_CHILD_SUBREAPER,
    PR_SET_DUMPABLE,
    prctl,
)
from runner.gpu import wire  # noqa: E402
from runner.gpu.kit import (  # noqa: E402
    Amplifier,
    Recorder,
    cpu_stream_stand_ins,
    sample_positions,
    sleep_cycles_per_second,
)
from runner.gpu.timing import Clock  # noqa: E402
from runner.harness import (  # noqa: E402
    Program,
    candidate_module,
    captured,
    exception_message,
    missing_entry_point,
    trimmed_traceback,
)
from runner.protocol import Channel  # noqa: E402
from runner.result import TRACE_LIMIT, BoundedText, NullText  # noqa: E402

NOBODY = 65534
TRUSTED_FRAME = 1 << 20  # what the grader sends is small
SYNC_WARNING = "synchronizing"  # torch's sync debug mode: "called a synchronizing CUDA operation"
MAX_SYNCS = 2000
IEEE = ("highest", False, False)  # full float32 matmuls: results comparable to the reference

_synchronize = torch.cuda.synchronize  # the real one, kept before any candidate code runs


# -- precision ---------------------------------------------------------------------


def precision() -> tuple:
    return (
        torch.get_float32_matmul_precision(),
        torch.backends.cuda.matmul.allow_tf32,
        torch.backends.cudnn.allow_tf32,
    )


def set_precision(state: tuple) -> None:
    torch.set_float32_matmul_precision(state[0])
    torch.backends.cuda.matmul.allow_tf32 = state[1]
    torch.backends.cudnn.allow_tf32 = state[2]


# -- host synchronisations ------------------------------------------------------------


@contextmanager
def watch_syncs(program: Program, recorder: Recorder, syncs: list):
    """Record host synchronisations made from the candidate's file (CUDA only): those
    torch's sync debug mode reports (``.item()``, ``.cpu()``, ``.tolist()``, ``bool()`` of a
    tensor, ``Stream.synchronize()``...) and ``torch.cuda.synchronize()``. Waiting on a
    CUDA event is not counted: it is how a host waits for one side stream's result."""
    if recorder.device.type != "cuda":
        yield
        return

    def note(text: str) -> None:
        frame = sys._getframe(1)
        while frame is not None and frame.f_code.co_filename != program.path:
            frame = frame.f_back
        if frame is not None and len(syncs) < MAX_SYNCS:
            syncs.append([frame.f_lineno, recorder.steps, text])

    previous_show = warnings.showwarning

    def showwarning(message, category, filename, lineno, file=None, line=None):
        if SYNC_WARNING in str(message):
            note("synchronizing operation")
        else:
            previous_show(message, category, filename, lineno, file, line)

    def synchronize(device=None):
        note("torch.cuda.synchronize()")
        return _synchronize(device)

    with warnings.catch_warnings():
        warnings.filterwarnings("always", message=f".*{SYNC_WARNING}.*")
        warnings.showwarning = showwarning
        torch.cuda.set_sync_debug_mode("warn")
        torch.cuda.synchronize = synchronize
        try:
            yield
        finally:
            torch.cuda.synchronize = _synchronize
            torch.cuda.set_sync_debug_mode("default")


# -- one run ---------------------------------------------------------------------------


class _Failed(Exception):
    def __init__(self, verdict: str, message: str, traceback: str | None, line: int | None):
        super().__init__(message)
        self.report = {
            "op": "failed",
            "verdict": verdict,
            "message": message,
            "traceback": traceback,
            "line": line,
        }


class Session:
    """What one child does for the grader (see the module docstring)."""

    def __init__(self, channel: Channel, exercise, spec: dict) -> None:
        self.channel = channel
        self.exercise = exercise
        self.spec = spec
        self.device = torch.device(spec["device"])
        self.cuda = self.device.type == "cuda"
        config = exercise.config if self.cuda else exercise.cpu_config
        self.config = exercise.no_early_stop(config) if spec.get("no_early_stop") else config

    def start(self) -> None:
        threads = os.environ.pop("OVERLAP_TORCH_THREADS", None)
        if threads:
            torch.set_num_threads(int(threads))
        if self.cuda:
            torch.cuda.set_device(self.device)
        else:
            cpu_stream_stand_ins()  # candidate code using streams runs (in order) on a CPU
        set_precision(IEEE)
        random.seed(0)
        torch.manual_seed(0)

    def job(self, recorder: Recorder):
        return self.exercise.build(self.device, self.config, recorder)

    def warm_up(self) -> None:
        """Trusted work before any candidate code: CUDA context, cuBLAS handles, the
        kernels of one epoch and one validation, the caching allocator."""
        for fn in self.exercise.components(self.job(Recorder(self.device))).values():
            fn()
        _synchronize(self.device) if self.cuda else None

    # -- kinds of conversation ---------------------------------------------------

    def components(self) -> dict:
        """Each piece of the work timed alone, by this (trusted) process's device clock:
        no candidate code ever runs here."""
        clock = Clock(self.device)
        seconds = {}
        for name in list(self.exercise.components(self.job(Recorder(self.device)))):

            def piece(name=name):
                return self.exercise.components(self.job(Recorder(self.device)))[name]

            piece()()  # warm-up
            trials = self.exercise.component_trials
            seconds[name] = [clock.time(piece())[0] for _ in range(trials)]
        name = torch.cuda.get_device_name(self.device) if self.cuda else "cpu"
        return {"op": "components", "seconds": seconds, "device_name": name}

    def run(self, program: Program) -> None:
        spec = self.spec
        recorder = Recorder(self.device, traced=bool(spec.get("traced")), amplifier=None)
        amplify = spec.get("amplify")
        if amplify and self.cuda:
            rate = sleep_cycles_per_second(self.device)
            per_batch = amplify.get("per_batch", 0.0)
            recorder.amplifier = Amplifier(
                step_cycles=int(rate * amplify["per_step"] / 4),
                validate_cycles=int(rate * 2 * amplify["per_epoch"]),
                copy_cycles=int(rate * 2 * per_batch),
                compute_cycles=int(rate * 2 * per_batch),
            )
        keep_output = bool(spec.get("output"))
        out, err = (BoundedText(), BoundedText()) if keep_output else (NullText(), NullText())
        syncs: list = []
        clock = Clock(self.device)
        self.channel.send({"op": "ready"})
        go = self.channel.recv()
        seed = int(go.get("seed", 0))
        before = precision()
        try:
            seconds, returned = clock.time(
                lambda: self._train(program, recorder, out, err, syncs, spec.get("watch"))
            )
            commit = _commit(returned, seed)
        except _Failed as failed:
            failed.report.update(stdout=out.getvalue(), stderr=err.getvalue())
            self.channel.send(failed.report)
            return
        self.channel.send({"op": "trained", "commit": commit})
        changed = precision() != before
        set_precision(IEEE)
        _synchronize(self.device) if self.cuda else None
        recorder.finish()
        validations = []
        for record in recorder.validations:
            with torch.no_grad():
                recomputed = float((record.recompute or record.compute)(record.weights))
            picked = sample_positions(record.weights)
            validations.append(
                {
                    "weights": [wire.encode_tensor(w) for w in picked],
                    "loss": wire.encode_number(float(record.loss)),
                    "recomputed": wire.encode_number(recomputed),
                    "lane": record.lane,
                }
            )
        self.channel.send(
            {
                "op": "report",
                "returned": wire.encode(returned),
                "seconds": seconds,
                "steps": recorder.steps,
                "validations": validations,
                "syncs": syncs,
                "precision_changed": changed,
                "trace": recorder.trace_json(TRACE_LIMIT),
                "stdout": out.getvalue(),
                "stderr": err.getvalue(),
            }
        )

    def _train(self, program, recorder, out, err, syncs, watch):
        namespace = candidate_module(program.path).__dict__
        try:
            with captured(out, err):
                exec(program.code, namespace)
        except BaseException as exc:
            text, line = trimmed_traceback(exc, program)
            raise _Failed("runtime_error", exception_message(exc, line), text, line) from None
        entry = namespace.get(self.exercise.entry_class)
        if not inspect.isclass(entry) or not callable(
            getattr(entry, self.exercise.entry_method, None)
        ):
            failure = missing_entry_point(self.exercise, namespace)
            raise _Failed(failure.verdict, failure.message, None, None)
        job = self.job(recorder)
        try:
            with captured(out, err), watch_syncs(program, recorder, syncs) if watch else _nothing():
                recorder.begin()
                trainer = entry(job)
                returned = getattr(trainer, self.exercise.entry_method)()
                if inspect.isawaitable(returned):
                    returned = asyncio.run(_await(returned))
            _synchronize(self.device) if self.cuda else None
        except BaseException as exc:
            text, line = trimmed_traceback(exc, program)
            raise _Failed("runtime_error", exception_message(exc, line), text, line) from None
        return returned


@contextmanager
def _nothing():
    yield


async def _await(awaitable):
    return await awaitable


def _commit(value, seed: int):
    """The returned value with every large tensor replaced by its values at positions
    drawn from ``seed`` (see the module docstring). Tensors are numbered in the order
    ``wire.encode`` meets them."""
    counter = [0]

    def walk(item, depth=0):
        if depth > wire.MAX_DEPTH:
            return wire.encode(item, depth)
        if isinstance(item, torch.Tensor):
            index = counter[0]
            counter[0] += 1
            flat = item.detach().reshape(-1)
            if flat.numel() <= wire.COMMIT_SMALL:
                return wire.encode_tensor(item)
            positions = wire.commit_positions(seed, index, flat.numel())
            return {"$c": wire.encode_tensor(flat[positions.to(flat.device)])}
        if isinstance(item, list | tuple):
            return [walk(v, depth + 1) for v in list(item)[: wire.MAX_ITEMS]]
        if isinstance(item, dict) and all(isinstance(k, str) for k in item):
            return {"$d": {k: walk(v, depth + 1) for k, v in list(item.items())[:4096]}}
        return wire.encode(item, depth)

    return walk(value)


# -- the process -------------------------------------------------------------------------


def _child(sock: socket.socket, exercise, limits: dict) -> None:
    debug = bool(os.environ.get("OVERLAP_DEBUG_CANDIDATE"))  # keep stderr: our tracebacks
    forkserver.confine(
        sock, int(limits.get("cpu_s", 600)), keep_stderr=debug, rlimits=limits.get("rlimits")
    )
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write fails (EFBIG) instead of killing
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
    channel = Channel(sock, max_frame=TRUSTED_FRAME)
    try:
        spec = channel.recv()
        program = None
        if spec["kind"] == "run":
            program = Program.from_file(spec["code"], spec.get("display"))
            linecache.getlines(program.path)  # tracebacks quote it after the drop below
        _drop_root()
        session = Session(channel, exercise, spec)
        session.start()
        if spec["kind"] == "components":
            session.warm_up()
            channel.send({"op": "ready"})
            channel.recv()
            channel.send(session.components())
            return
        if spec.get("warm"):
            session.warm_up()
        session.run(program)
    except BaseException:
        if debug:
            import traceback

            traceback.print_exc()
    finally:
        os._exit(0)


def _drop_root() -> None:
    """The run takes the candidate's own uid where the worker can switch users (root on a
    host, the docker sandbox's trusted side: runner.privileges), so neither capabilities
    (CAP_SYS_PTRACE overrides non-dumpable) nor a shared uid let it reach the grader. A
    root worker that somehow cannot switch still becomes ``nobody``."""
    if privileges.become_candidate() or os.geteuid() != 0:
        return
    os.setgroups([])
    os.setgid(NOBODY)
    os.setuid(NOBODY)


def _reap(pid: int) -> dict:
    forkserver.kill_session(pid)
    answer = forkserver.wait_status(pid)
    # What the run left behind (reparented here: we are a subreaper): killed, reaped.
    forkserver.kill_strays()
    return answer


def main() -> None:
    prctl(PR_SET_DUMPABLE, 0)  # a run (same uid) cannot ptrace us or open our /proc files
    prctl(PR_SET_CHILD_SUBREAPER, 1)
    # argv: --exercise <folder> <control fd> (runner.gpu.host.Server)
    exercise = load(sys.argv[2])
    control = socket.socket(fileno=int(sys.argv[3]))
    # Imported here, before any fork: runs start warm, and what these imports write
    # (tempfile probes a directory) is done before a run may write no file.
    import tempfile

    import torch._dynamo  # the optimizer's first step imports it

    tempfile.gettempdir()
    if exercise.prepare is not None:
        # One thread: no OpenMP team may exist in a process that forks (a child's first
        # parallel region could hang); each run restores the default (Session.start).
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        exercise.prepare(os.environ.get("OVERLAP_DEVICE_TYPE", "cuda"))
        os.environ["OVERLAP_TORCH_THREADS"] = str(threads)
    forkserver.serve(
        control, lambda sock, limits: _child(sock, exercise, limits), {"reap": _reap}
    )


if __name__ == "__main__":
    main()
