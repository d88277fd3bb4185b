"""Worker heartbeats: every Celery worker writes a short-lived Redis key saying who it is,
which queues it takes, whether it has a GPU and how full its warm sandbox pool is.

/healthz counts a worker as up while its key lives (OVERLAP_WORKER_STALE_SECONDS); the
status page lists them. A worker that dies stops writing and its key expires.

A worker whose sandbox cannot run refuses its sandbox queues (monitoring/worker_gate.py):
its main process's heartbeat then carries ``refusing`` ({"queues", "why"}), and
``queue_served`` counts that worker (every process of its host name) out of them.
"""

import json
import logging
import os
import threading
import time
from collections import defaultdict

from django.conf import settings

from monitoring import store

log = logging.getLogger(__name__)
WORKERS = "worker"
SANDBOX_REPORT_EVERY = 4  # beats: the docker image check is not free

# This process's sandbox gates (monitoring/worker_gate.py), by worker host name: the pid
# that decided (a pool process forked later must not repeat its parent's refusal), the
# sandbox queues the worker is configured for, and what it refuses ({}: nothing).
_gates: dict[str, tuple[int, list[str], dict]] = {}
_live: list["Heartbeat"] = []  # started in this process, not stopped


def pool_stats() -> dict:
    """Warm sandboxes ready / wanted in this process (0/0 when no pool runs here)."""
    import sys

    pool_module = sys.modules.get("runner.sandbox.pool")
    ready = wanted = 0
    backend = ""
    for pool in list(getattr(pool_module, "_pools", []) or []):
        ready += len(getattr(pool, "_ready", ()))
        wanted += int(getattr(pool, "size", 0) or 0)
        backend = getattr(getattr(pool, "backend", None), "name", backend)
    return {"ready": ready, "size": wanted, "backend": backend}


def beat(*, hostname: str, queues: list[str], pid: int | None = None,
         sandbox: dict | None = None, refusing: dict | None = None) -> dict:
    """Write this worker's heartbeat now; returns what was written. ``queues`` are those
    it takes; ``refusing`` ({"queues", "why"}) those it is configured for but refuses."""
    pid = pid or os.getpid()
    refusing = refusing or {}
    document = {
        "hostname": hostname,
        "pid": pid,
        "queues": sorted(set(queues) | set(refusing.get("queues") or [])),
        "refusing": refusing,
        "gpu": settings.OVERLAP_GPU or "",
        "sandbox": settings.OVERLAP_SANDBOX,
        "pool": pool_stats(),
        "sandbox_report": sandbox or {},
        "at": time.time(),
    }
    store.client().set(store.key(WORKERS, hostname, str(pid)), json.dumps(document),
                       ex=settings.OVERLAP_WORKER_STALE_SECONDS)
    return document


def forget(*, hostname: str, pid: int | None = None) -> None:
    store.client().delete(store.key(WORKERS, hostname, str(pid or os.getpid())))


def workers_online() -> list[dict]:
    """Every worker process whose heartbeat has not expired, newest first."""
    client = store.client()
    keys = list(client.scan_iter(match=store.key(WORKERS, "*"), count=500))
    documents = []
    for raw in client.mget(keys) if keys else []:
        if raw:
            try:
                documents.append(json.loads(raw))
            except ValueError:
                continue
    stale_before = time.time() - settings.OVERLAP_WORKER_STALE_SECONDS
    return sorted((d for d in documents if d.get("at", 0) >= stale_before),
                  key=lambda d: -d["at"])


def refusals(workers: list[dict]) -> dict[str, str]:
    """Host name -> why, for each worker that refuses work (its sandbox cannot run)."""
    return {w["hostname"]: (w.get("refusing") or {}).get("why") or "it refuses work"
            for w in workers if (w.get("refusing") or {}).get("queues")}


def serving(workers: list[dict]) -> dict[str, set[str]]:
    """Host name -> the queues that worker takes now: those its processes' heartbeats
    list, less those any of them refuses (its main process decides; pool processes only
    list the queues they were started with)."""
    listed: dict[str, set[str]] = defaultdict(set)
    refused: dict[str, set[str]] = defaultdict(set)
    for w in workers:
        listed[w["hostname"]].update(w.get("queues") or [])
        refused[w["hostname"]].update((w.get("refusing") or {}).get("queues") or [])
    return {host: queues - refused[host] for host, queues in listed.items()}


def queue_served(queue: str) -> bool:
    """Whether a live worker takes ``queue`` (False when Redis cannot say). A worker that
    refuses it (its sandbox cannot run) does not."""
    try:
        return any(queue in queues for queues in serving(workers_online()).values())
    except Exception:  # Redis away: nobody can be shown to serve it
        return False


def queue_refusal(queue: str) -> str | None:
    """Why ``queue``'s jobs wait: no live worker takes it, and one that is there for it
    refuses it (its sandbox cannot run). None when one takes it, when none is there for
    it at all, or when Redis cannot say."""
    try:
        workers = workers_online()
    except Exception:
        return None
    if any(queue in queues for queues in serving(workers).values()):
        return None
    refused = [w for w in workers if queue in ((w.get("refusing") or {}).get("queues") or [])]
    return refusals(refused).popitem()[1] if refused else None


def gate_decided(hostname: str, *, queues: list[str], refusing: dict, report: dict,
                 beat_now: bool) -> None:
    """A sandbox gate of this process (monitoring/worker_gate.py) checked its sandboxes:
    this process's heartbeats for ``hostname`` carry its report, its queues and what it
    refuses from now on, at once when that changed."""
    _gates[hostname] = (os.getpid(), list(queues), refusing)
    for running in [h for h in _live if h.hostname == hostname and h.pid == os.getpid()]:
        running._sandbox = report
        if beat_now:
            running._safe_beat()


def gate_gone(hostname: str) -> None:
    _gates.pop(hostname, None)


def _gate_here(hostname: str) -> tuple[list[str], dict]:
    """The queues this process's gate for ``hostname`` holds (the consumer's selection
    lacks them while it refuses) and what it refuses."""
    pid, queues, refusing = _gates.get(hostname, (0, [], {}))
    return (queues, refusing) if pid == os.getpid() else ([], {})


class Heartbeat:
    """Beats once at start, then from a daemon thread every OVERLAP_HEARTBEAT_SECONDS until
    stopped. It also reports on the sandboxes (backend, image), from
    the thread so a slow Docker engine never delays the worker's start."""

    def __init__(self, *, hostname: str, queues: list[str]):
        self.hostname, self.queues = hostname, queues
        self.pid = os.getpid()
        self._sandbox: dict = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="overlap-heartbeat",
                                        daemon=True)

    def start(self) -> "Heartbeat":
        _live.append(self)
        self._safe_beat()
        self._thread.start()
        return self

    def _safe_beat(self) -> None:
        gated, refusing = _gate_here(self.hostname)
        try:
            beat(hostname=self.hostname, queues=sorted(set(self.queues) | set(gated)),
                 pid=self.pid, sandbox=self._sandbox, refusing=refusing)
        except Exception as exc:  # Redis away: the key expires and /healthz says so
            log.warning("worker heartbeat failed: %s", exc)

    def _run(self) -> None:
        beats = 0
        while not self._stop.is_set():
            if self.queues and beats % SANDBOX_REPORT_EVERY == 0:
                from monitoring.sandbox_report import sandbox_report

                self._sandbox = sandbox_report()
                self._safe_beat()
            beats += 1
            if self._stop.wait(settings.OVERLAP_HEARTBEAT_SECONDS):
                break
            self._safe_beat()

    def stop(self) -> None:
        self._stop.set()
        if self in _live:
            _live.remove(self)
        try:
            forget(hostname=self.hostname, pid=self.pid)
        except Exception as exc:
            log.warning("could not remove the worker heartbeat: %s", exc)
