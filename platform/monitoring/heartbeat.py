"""Worker heartbeats: every Celery worker writes a short-lived Redis key saying who it is,
which queues it takes, whether it has a GPU and how full its warm sandbox pool is.

/healthz counts a worker as up while its key lives (OVERLAP_WORKER_STALE_SECONDS); the
status page lists them. A worker that dies stops writing and its key expires.
"""

import json
import logging
import os
import threading
import time

from django.conf import settings

from monitoring import store

log = logging.getLogger(__name__)
WORKERS = "worker"
SANDBOX_REPORT_EVERY = 4  # beats: the docker image check is not free


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
         sandbox: dict | None = None) -> dict:
    """Write this worker's heartbeat now; returns what was written."""
    pid = pid or os.getpid()
    document = {
        "hostname": hostname,
        "pid": pid,
        "queues": sorted(queues),
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


def queue_served(queue: str) -> bool:
    """Whether a live worker takes ``queue`` (False when Redis cannot say)."""
    try:
        return any(queue in (w.get("queues") or []) for w in workers_online())
    except Exception:  # Redis away: nobody can be shown to serve it
        return False


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
        self._safe_beat()
        self._thread.start()
        return self

    def _safe_beat(self) -> None:
        try:
            beat(hostname=self.hostname, queues=self.queues, pid=self.pid,
                 sandbox=self._sandbox)
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
        try:
            forget(hostname=self.hostname, pid=self.pid)
        except Exception as exc:
            log.warning("could not remove the worker heartbeat: %s", exc)
