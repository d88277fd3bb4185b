"""The superusers' system status page: workers, queues, sandboxes, GPUs, recent runs."""

import time
from datetime import timedelta

from django.db.models import Count
from django.utils import timezone

from monitoring import heartbeat, metrics
from monitoring.health import health_report


def _celery_ping(timeout_s: float = 1.0) -> dict:
    """Workers that answer a broadcast ping right now (independent of heartbeats)."""
    from overlap.celery import app

    try:
        replies = app.control.inspect(timeout=timeout_s).ping() or {}
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {exc}"[:200], "workers": []}
    return {"workers": sorted(replies)}


def system_status() -> dict:
    from runs.models import Run

    now = time.time()
    processes = heartbeat.workers_online()
    workers: dict[str, dict] = {}
    for doc in processes:
        worker = workers.setdefault(doc["hostname"], {
            "hostname": doc["hostname"], "queues": [], "gpu": doc.get("gpu", ""),
            "processes": 0, "pool_ready": 0, "pool_size": 0, "sandbox": {},
            "last_beat_s": round(now - doc["at"], 1)})
        worker["processes"] += 1
        worker["queues"] = sorted(set(worker["queues"]) | set(doc.get("queues", [])))
        worker["pool_ready"] += doc.get("pool", {}).get("ready", 0)
        worker["pool_size"] += doc.get("pool", {}).get("size", 0)
        if doc.get("sandbox_report"):
            worker["sandbox"] = doc["sandbox_report"]
        if (doc.get("refusing") or {}).get("queues"):
            worker["refusing"] = doc["refusing"]
    since = timezone.now() - timedelta(hours=1)
    recent = (Run.objects.filter(finished_at__gte=since)
              .values("verdict", "status").annotate(n=Count("id")).order_by("-n"))
    return {
        "health": health_report(),
        "workers": sorted(workers.values(), key=lambda w: w["hostname"]),
        "gpu_workers": sorted(w["hostname"] for w in workers.values()
                              if w["gpu"] or "gpu" in w["queues"]),
        "ping": _celery_ping(),
        "queues": metrics.queue_depths(),
        "active_runs": {status: Run.objects.filter(status=status).count()
                        for status in Run.ACTIVE},
        "recent_runs": list(recent),
    }
