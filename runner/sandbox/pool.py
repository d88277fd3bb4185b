"""The warm pool: sandboxes started ahead of time, torch already imported.

A pooled sandbox is exactly like a cold one (same limits, same isolation); it has only
started earlier and imported torch while idle. A docker sandbox serves several jobs one
after the other (``OVERLAP_SANDBOX_JOBS``, default 50): after each, its first process
kills every process the job left, wipes every writable folder and System V IPC object,
and says in its report whether it may take another; if not (or the run hit a limit, or
the report was not clean), it is destroyed and a background thread starts its replacement
(starting one means importing torch: on a small machine, doing it during the run would
slow the run down). Other backends run one job per sandbox.
A run whose creation-time limits (memory, CPU, processes, disk) or GPU request differ
from the pool's gets a cold sandbox instead.

    start_pool("docker", size=2)   # at worker start; then runs use it automatically
    stop_pool()                    # at worker shutdown (also done at exit)
"""

import atexit
import collections
import contextlib
import logging
import os
import threading
import time

from runner.sandbox.backends.base import Backend, Sandbox
from runner.sandbox.choice import choose_backend, normalize_gpu
from runner.sandbox.limits import Limits

log = logging.getLogger(__name__)
READY_TIMEOUT_S = 120.0
MAX_AGE_S = 1800.0  # a pooled sandbox older than this is replaced (its first process
# gives up after an hour without a job: see IDLE_TIMEOUT_S in the backends)
RECHECK_S = 60.0
DEFAULT_SIZES = {"docker": 2, "bwrap": 0, "process": 0}


def default_size(backend: str) -> int:
    configured = os.environ.get("OVERLAP_SANDBOX_POOL_SIZE")
    if configured is not None:
        return max(0, int(configured))
    return DEFAULT_SIZES.get(backend, 0)


class WarmPool:
    def __init__(self, backend: Backend, size: int, limits: Limits | None = None, gpu=None):
        self.backend = backend
        self.size = size
        self.limits = limits or Limits()
        self.gpu = gpu
        self._ready: collections.deque[tuple[Sandbox, float]] = collections.deque()
        self._in_use = 0
        self._lock = threading.Condition()
        self._closed = False
        # One long-lived thread starts every pooled sandbox: bwrap's --die-with-parent and
        # the process backend's parent-death signal fire when the *starting thread* ends.
        self._thread = threading.Thread(target=self._fill, name="sandbox-pool", daemon=True)
        self._thread.start()

    def matches(self, backend: str, limits: Limits, gpu) -> bool:
        return (
            backend == self.backend.name
            and limits.creation_key() == self.limits.creation_key()
            and gpu == self.gpu
        )

    def take(self) -> Sandbox | None:
        """A ready sandbox, or None (the caller starts a cold one)."""
        while True:
            with self._lock:
                if not self._ready:
                    return None
                sandbox, started = self._ready.popleft()
                self._in_use += 1
            sandbox.pool = self
            sandbox.pool_started = started
            if time.monotonic() - started < MAX_AGE_S and sandbox.alive():
                sandbox.pooled = True
                return sandbox
            sandbox.destroy()  # died while idle (or about to): never hand it out
            self.release()

    def give_back(self, sandbox: Sandbox) -> None:
        """A sandbox from this pool ran its job and was reset for another: ready again."""
        with self._lock:
            self._in_use -= 1
            keep = not self._closed and len(self._ready) < self.size
            if keep:
                self._ready.append((sandbox, sandbox.pool_started))
            self._lock.notify_all()
        if not keep:
            sandbox.destroy()

    def release(self) -> None:
        """The run of a sandbox taken from this pool has ended: time to start another."""
        with self._lock:
            self._in_use -= 1
            self._lock.notify_all()

    def wait_full(self, timeout_s: float = READY_TIMEOUT_S) -> bool:
        deadline = time.monotonic() + timeout_s
        with self._lock:
            while len(self._ready) < self.size:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self._closed:
                    return False
                self._lock.wait(remaining)
        return True

    def _fill(self) -> None:
        failures = 0
        while True:
            with self._lock:
                while not self._closed and len(self._ready) + self._in_use >= self.size:
                    if not self._lock.wait(RECHECK_S):
                        self._drop_stale()
                if self._closed:
                    return
            try:
                sandbox = self.backend.start(self.limits, self.gpu, preload=True)
            except Exception:
                failures += 1
                log.exception("starting a pooled %s sandbox failed", self.backend.name)
                time.sleep(min(30.0, 0.5 * 2**failures))
                continue
            if not sandbox.wait_ready(READY_TIMEOUT_S):
                failures += 1
                log.warning("a pooled %s sandbox never became ready", self.backend.name)
                sandbox.destroy()
                time.sleep(min(30.0, 0.5 * 2**failures))
                continue
            failures = 0
            with self._lock:
                if self._closed:  # started while closing: close() joins this thread
                    sandbox.destroy(wait=True)
                    return
                self._ready.append((sandbox, time.monotonic()))
                self._lock.notify_all()

    def _drop_stale(self) -> None:
        """With the lock held: destroy sandboxes too old or dead, so they are replaced."""
        keep = collections.deque()
        for sandbox, started in self._ready:
            if time.monotonic() - started < MAX_AGE_S and sandbox.alive():
                keep.append((sandbox, started))
            else:
                threading.Thread(target=sandbox.destroy, daemon=True).start()
        self._ready = keep

    def close(self) -> None:
        with self._lock:
            self._closed = True
            leftovers = [sandbox for sandbox, _ in self._ready]
            self._ready.clear()
            self._lock.notify_all()
        for sandbox in leftovers:  # at shutdown: gone before this process is
            with contextlib.suppress(Exception):
                sandbox.destroy(wait=True)
        self._thread.join(timeout=READY_TIMEOUT_S)


_pools: list[WarmPool] = []
_pools_lock = threading.Lock()


def start_pool(backend: str = "auto", size: int | None = None, limits=None, gpu=None):
    """Start a warm pool for `backend` (auto: the backend runs would use). Returns it, or
    None when the size is 0."""
    chosen = choose_backend(backend)
    size = default_size(chosen.name) if size is None else size
    if size <= 0:
        return None
    pool = WarmPool(chosen, size, limits, normalize_gpu(gpu))
    with _pools_lock:
        _pools.append(pool)
    return pool


def stop_pool() -> None:
    with _pools_lock:
        pools = list(_pools)
        _pools.clear()
    for pool in pools:
        pool.close()


def take_warm(backend: str, limits: Limits, gpu) -> Sandbox | None:
    with _pools_lock:
        pools = list(_pools)
    for pool in pools:
        if pool.matches(backend, limits, gpu):
            sandbox = pool.take()
            if sandbox is not None:
                return sandbox
    return None


atexit.register(stop_pool)
