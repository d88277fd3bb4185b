"""The sandbox daemon: the only process that holds the Docker engine's socket.

A worker that talks to the Docker engine directly is root on its host: the engine's API
starts any container, with the host's `/` mounted, privileged, in the host's namespaces.
The daemon takes that socket away from the worker. It listens on a Unix socket and
answers two requests, nothing else:

    {"op": "status"}                          can it run sandboxes (and why not)
    {"op": "run", "job": {...}, "gpu": ...}   run one job; the answer is its result

A job is what ``runner.sandbox.job`` already defines: files, an entry (the runner's
grade command or a script), limits and whether the entry runs as the candidate's user.
Everything about the container (its image, mounts, capabilities, seccomp, network, user)
is decided here, by ``runner.sandbox.backends.docker``, never by the request; a request
with any other field, a limit above the daemon's ceilings, an unsafe file name or more
bytes than a job may carry is refused with the reason. The worker then needs no Docker
socket and no root (``OVERLAP_SANDBOX=daemon``; docs/deploy.md).

    python -m runner.sandbox.daemon --socket /run/overlap-sandbox/sandbox.sock --group 10002

Frames on the socket: 4 bytes of length (big-endian), then that many bytes of JSON.
"""

import argparse
import base64
import binascii
import contextlib
import json
import logging
import os
import select
import signal
import socket
import socketserver
import struct
import sys
import threading
import time
from dataclasses import fields
from pathlib import PurePosixPath

from runner.sandbox.backends.base import SandboxUnavailable
from runner.sandbox.job import CANDIDATE_FILE, MAX_EXERCISE_BYTES, Job
from runner.sandbox.limits import Limits

log = logging.getLogger("overlap.sandboxd")

DEFAULT_SOCKET = "/run/overlap-sandbox/sandbox.sock"
HEADER = struct.Struct(">I")
MAX_CODE_BYTES = 1024 * 1024
MAX_FILES = 2000
MAX_NAME = 255
MAX_ARGS = 32
MAX_ARG = 4096
# A request carries the job's files base64-encoded: a third more than their bytes.
MAX_REQUEST_BYTES = (MAX_EXERCISE_BYTES + MAX_CODE_BYTES) * 4 // 3 + 64 * 1024
READ_REQUEST_S = 30.0  # a client that does not finish sending its request in time is cut
MAX_CONNECTIONS = 64  # open at once; more are answered "busy" at once (threads, memory)


def ceilings() -> Limits:
    """The most any request may ask for; what an exercise declares must fit under these."""
    return Limits(
        wall_s=600.0,
        stall_s=120.0,
        memory_mib=int(os.environ.get("OVERLAP_SANDBOXD_MAX_MEMORY_MIB", "16384")),
        cpus=float(max(2, os.cpu_count() or 2)),
        processes=512,
        output_kib=1024,
        disk_mib=2048,
        open_files=4096,
        result_kib=16384,
    )


class Refused(ValueError):
    """The request is not one the daemon runs: the message says why."""


# -- frames ---------------------------------------------------------------------------


def send_frame(sock: socket.socket, message: dict) -> None:
    body = json.dumps(message).encode()
    sock.sendall(HEADER.pack(len(body)) + body)


def recv_frame(sock: socket.socket, limit: int, deadline: float) -> dict:
    """One frame, at most `limit` bytes, before `deadline` (time.monotonic)."""
    size = HEADER.unpack(_recv_exactly(sock, HEADER.size, deadline))[0]
    if size > limit:
        raise Refused(f"a message of {size} bytes is larger than the {limit} allowed")
    try:
        message = json.loads(_recv_exactly(sock, size, deadline))
    except ValueError:
        raise Refused("the message is not JSON") from None
    if not isinstance(message, dict):
        raise Refused("the message is not an object")
    return message


def _recv_exactly(sock: socket.socket, size: int, deadline: float) -> bytes:
    chunks, got = [], 0
    while got < size:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("no complete message in time")
        sock.settimeout(remaining)
        chunk = sock.recv(min(size - got, 1 << 20))
        if not chunk:
            raise ConnectionError("the other side closed the connection")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


# -- what a request may ask ----------------------------------------------------------


def _only(mapping: dict, allowed: set[str], what: str) -> None:
    unknown = sorted(set(mapping) - allowed)
    if unknown:
        raise Refused(f"{what} takes no {', '.join(repr(k) for k in unknown)}")


def _arguments(value) -> list[str]:
    if not isinstance(value, list) or len(value) > MAX_ARGS:
        raise Refused(f"argv must be a list of at most {MAX_ARGS} strings")
    for item in value:
        if not isinstance(item, str) or len(item) > MAX_ARG or "\0" in item:
            raise Refused("argv must hold short strings")
    return list(value)


def _entry(value) -> dict:
    if not isinstance(value, dict):
        raise Refused("entry must be an object")
    if "module" in value:
        _only(value, {"module", "argv"}, "entry")
        argv = _arguments(value.get("argv"))
        if value["module"] != "runner" or not argv or argv[0] != "grade":
            raise Refused("the only module entry is the runner's grade command")
        return {"module": "runner", "argv": argv}
    _only(value, {"script", "argv"}, "entry")
    if value.get("script") != CANDIDATE_FILE:
        raise Refused(f"a script entry runs {CANDIDATE_FILE}")
    return {"script": CANDIDATE_FILE, "argv": _arguments(value.get("argv", []))}


def _files(value) -> dict[str, bytes]:
    if not isinstance(value, dict) or len(value) > MAX_FILES:
        raise Refused(f"files must be an object of at most {MAX_FILES} files")
    files, total = {}, 0
    for name, data in value.items():
        path = PurePosixPath(name)
        if (
            not name
            or len(name) > 4 * MAX_NAME
            or "\0" in name
            or "\\" in name
            or path.is_absolute()
            or any(part in ("", ".", "..") for part in name.split("/"))
            or any(len(part) > MAX_NAME for part in path.parts)
        ):
            raise Refused(f"unsafe file name {name[:80]!r}")
        if not isinstance(data, str):
            raise Refused(f"file {name!r} is not base64 text")
        try:
            content = base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError):
            raise Refused(f"file {name!r} is not base64") from None
        total += len(content)
        most = MAX_EXERCISE_BYTES + MAX_CODE_BYTES
        if total > most:
            raise Refused(f"the job's files are larger than {most} bytes")
        files[name] = content
    return files


def _limits(value) -> Limits:
    if not isinstance(value, dict):
        raise Refused("limits must be an object")
    try:
        limits = Limits.from_mapping(value)
    except (TypeError, ValueError) as exc:
        raise Refused(str(exc)) from None
    most = ceilings()
    for field in fields(Limits):
        if getattr(limits, field.name) > getattr(most, field.name):
            raise Refused(
                f"limit {field.name}={getattr(limits, field.name)} is above this daemon's "
                f"ceiling ({getattr(most, field.name)})"
            )
    return limits


def _gpu(value, served):
    from runner.sandbox.choice import normalize_gpu

    if value is not None and not isinstance(value, str | list | bool):
        raise Refused("gpu must be null, \"all\" or a list of device ids")
    gpu = normalize_gpu(value)
    if gpu is None:
        return None
    if served is None:
        raise Refused("this sandbox daemon serves no GPU (its OVERLAP_GPU is not set)")
    if served != "all" and (gpu == "all" or not set(gpu) <= set(served)):
        raise Refused(f"this sandbox daemon serves GPUs {','.join(served)} only")
    return gpu


def job_from_request(message: dict, served_gpu=None) -> tuple[Job, object]:
    """The job (and GPU request) a "run" request describes, or Refused."""
    _only(message, {"op", "job", "gpu"}, "a run request")
    spec = message.get("job")
    if not isinstance(spec, dict):
        raise Refused("a run request needs a job")
    _only(spec, {"entry", "files", "limits", "as_candidate"}, "a job")
    as_candidate = spec.get("as_candidate", False)
    if not isinstance(as_candidate, bool):
        raise Refused("as_candidate must be true or false")
    job = Job(
        entry=_entry(spec.get("entry")),
        files=_files(spec.get("files", {})),
        limits=_limits(spec.get("limits", {})),
        as_candidate=as_candidate,
    )
    return job, _gpu(message.get("gpu"), served_gpu)


def job_request(job: Job, gpu) -> dict:
    """The request that asks a daemon to run `job` (the client's side of the above)."""
    return {
        "op": "run",
        "job": {
            "entry": job.entry,
            "files": {k: base64.b64encode(v).decode() for k, v in job.files.items()},
            "limits": job.limits.as_dict(),
            "as_candidate": job.as_candidate,
        },
        "gpu": gpu,
    }


# -- the server -------------------------------------------------------------------------


class Daemon:
    def __init__(self, backend_name: str = "docker", jobs_at_once: int | None = None, gpu=None):
        from runner.sandbox.choice import get_backend, normalize_gpu

        self.backend = get_backend(backend_name)
        self.gpu = normalize_gpu(gpu)
        self.jobs_at_once = jobs_at_once or max(2, os.cpu_count() or 2)
        self.slots = threading.BoundedSemaphore(self.jobs_at_once)
        self.served = 0
        self.refused = 0
        self.connections = threading.BoundedSemaphore(MAX_CONNECTIONS)
        self.stopping = threading.Event()
        self.pool_lock = threading.Lock()
        self._running: set[_HangupWatch] = set()  # the jobs in progress
        self._running_lock = threading.Lock()

    def stop(self) -> None:
        """At shutdown: the jobs in progress are stopped and their sandboxes removed (their
        workers hear that the daemon went away; recovery runs them again), never left."""
        self.stopping.set()
        with self._running_lock:
            running = list(self._running)
        for watch in running:
            if watch.sandbox is not None:
                with contextlib.suppress(Exception):
                    watch.sandbox.destroy(wait=True)

    def answer(self, message: dict, peer: str, conn: socket.socket | None = None) -> dict:
        op = message.get("op")
        if op == "status":
            _only(message, {"op"}, "a status request")
            return {"ok": True, "backend": self.backend.name, "problem": self.backend.problem(),
                    "gpu": self.gpu, "served": self.served, "refused": self.refused}
        if op != "run":
            raise Refused(f"unknown request {str(op)[:40]!r} (this daemon answers status and run)")
        job, gpu = job_from_request(message, self.gpu)
        from runner.sandbox.run import execute

        with self.slots:
            if self.stopping.is_set():
                raise SandboxUnavailable("the sandbox daemon is stopping")
            hangup = _HangupWatch(conn, peer)
            with self._running_lock:
                self._running.add(hangup)
            try:
                result = execute(job, self.backend, gpu, on_sandbox=hangup.watch)
            finally:
                hangup.stop()
                with self._running_lock:
                    self._running.discard(hangup)
            if self.stopping.is_set():  # its sandbox was removed under it: no verdict
                raise SandboxUnavailable("the sandbox daemon stopped during the job")
        self.served += 1
        log.info("ran a job for %s: %s in %.2f s", peer, result.get("status"),
                 (result.get("sandbox") or {}).get("duration_s", 0.0))
        return {"ok": True, "result": result}

    def handle(self, conn: socket.socket) -> None:
        if not self.connections.acquire(blocking=False):
            self.refused += 1
            with contextlib.suppress(OSError):
                conn.settimeout(5.0)
                send_frame(conn, {"ok": False, "unavailable": "the sandbox daemon is busy "
                                  f"({MAX_CONNECTIONS} connections open)"})
            return
        try:
            self._handle(conn)
        finally:
            self.connections.release()

    def _handle(self, conn: socket.socket) -> None:
        peer = _peer(conn)
        try:
            message = recv_frame(conn, MAX_REQUEST_BYTES, time.monotonic() + READ_REQUEST_S)
            reply = self.answer(message, peer, conn)
        except Refused as exc:
            self.refused += 1
            log.warning("refused a request from %s: %s", peer, exc)
            reply = {"ok": False, "refused": str(exc)}
        except SandboxUnavailable as exc:
            reply = {"ok": False, "unavailable": str(exc)}
        except (ConnectionError, TimeoutError, OSError) as exc:
            log.warning("dropped a connection from %s: %s", peer, exc)
            return
        except Exception as exc:  # never let one request take the daemon down
            log.exception("a request from %s failed", peer)
            reply = {"ok": False, "unavailable": f"the sandbox daemon failed: {type(exc).__name__}"}
        with contextlib.suppress(OSError):
            conn.settimeout(30.0)
            send_frame(conn, reply)


class _HangupWatch:
    """A worker that hangs up (its process died, it gave up) no longer wants its job: the
    sandbox is destroyed at once instead of running to its limits and holding a slot."""

    def __init__(self, conn: socket.socket | None, peer: str):
        self.conn, self.peer = conn, peer
        self.done = threading.Event()
        self.sandbox = None
        self.thread = threading.Thread(target=self._run, name="sandboxd-hangup", daemon=True)
        self.thread.start()

    def watch(self, sandbox) -> None:
        self.sandbox = sandbox

    def stop(self) -> None:
        self.done.set()
        self.thread.join(timeout=5)

    def _run(self) -> None:
        if self.conn is None:  # asked in-process (tests): nobody to hang up
            return
        while not self.done.wait(0.25):
            try:
                readable, _, _ = select.select([self.conn], [], [], 0)
                # The client sends nothing after its request: readable means it closed.
                gone = bool(readable) and not self.conn.recv(1, socket.MSG_PEEK)
            except (OSError, ValueError):
                gone = True
            if gone and self.sandbox is not None and not self.done.is_set():
                log.warning("%s hung up: its job is stopped", self.peer)
                with contextlib.suppress(Exception):
                    self.sandbox.destroy()
                return


def _peer(conn: socket.socket) -> str:
    try:
        creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        pid, uid, _gid = struct.unpack("3i", creds)
    except OSError:
        return "?"
    return f"pid {pid} uid {uid}"


class _Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    # A burst of workers connecting at once waits in the backlog (a full one makes a
    # client's connect fail at once with EAGAIN, not wait).
    request_queue_size = 2 * MAX_CONNECTIONS

    def __init__(self, path: str, daemon: Daemon):
        self.overlap = daemon
        super().__init__(path, _Handler)


class _Handler(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        self.server.overlap.handle(self.request)


def listen(path: str, daemon: Daemon, group: int | None = None) -> _Server:
    """Bind the socket: owner and `group` may connect (0660), nobody else."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    old_mask = os.umask(0o177)
    try:
        server = _Server(path, daemon)
    finally:
        os.umask(old_mask)
    if group is not None:
        os.chown(path, -1, group)
    os.chmod(path, 0o660)
    return server


def _keep_warm(daemon: Daemon, backend: str) -> None:
    """Start the warm pool once sandboxes can run (the engine may come up after us, the
    image may be built later); until then status requests say what is missing."""
    from runner.sandbox import pool

    said = None
    while not daemon.stopping.is_set():
        problem = daemon.backend.problem()
        if problem is None:
            # One warm sandbox per job it runs at once, unless the operator says otherwise.
            size = None if os.environ.get("OVERLAP_SANDBOX_POOL_SIZE") else daemon.jobs_at_once
            with daemon.pool_lock:  # never a pool started after the daemon stopped them
                if not daemon.stopping.is_set():
                    with contextlib.suppress(SandboxUnavailable):
                        pool.start_pool(backend, size=size, gpu=daemon.gpu)
            return
        if problem != said:
            log.error("sandboxes cannot run yet: %s", problem)
            said = problem
        daemon.stopping.wait(10)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m runner.sandbox.daemon")
    parser.add_argument("--socket",
                        default=os.environ.get("OVERLAP_SANDBOX_SOCKET", DEFAULT_SOCKET))
    parser.add_argument("--group", type=int, default=None,
                        help="the group (id) whose members may connect: the workers' group")
    parser.add_argument("--backend", default="docker", choices=("docker", "bwrap"))
    parser.add_argument("--jobs-at-once", type=int, default=None)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s sandboxd %(levelname)s %(message)s")

    from runner.sandbox import pool
    from runner.sandbox.run import reap_leftovers

    daemon = Daemon(args.backend, args.jobs_at_once, os.environ.get("OVERLAP_GPU") or None)
    removed = reap_leftovers()
    threading.Thread(target=_keep_warm, args=(daemon, args.backend), daemon=True).start()
    server = listen(args.socket, daemon, args.group)
    log.info("listening on %s (group %s); %d leftover sandboxes removed",
             args.socket, args.group, removed)

    def stop(signum, frame):
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        server.serve_forever()
    finally:
        server.server_close()
        daemon.stop()
        with daemon.pool_lock:
            pool.stop_pool()
        if hasattr(daemon.backend, "remove_own"):  # what background removals had left
            daemon.backend.remove_own()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(args.socket)
    return 0


if __name__ == "__main__":
    sys.exit(main())
