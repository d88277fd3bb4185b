"""What /healthz checks: the database, Redis, and a Celery worker that beat recently."""

import time

from django.conf import settings
from django.db import connection

from monitoring import heartbeat, store


def _timed(check) -> dict:
    started = time.monotonic()
    try:
        details = check() or {}
        ok = details.pop("ok", True)
    except Exception as exc:
        ok, details = False, {"error": f"{type(exc).__name__}: {exc}"[:300]}
    return {"ok": ok, "ms": round((time.monotonic() - started) * 1000, 1), **details}


def _database() -> dict:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return {}


def _redis() -> dict:
    store.client().ping()
    return {}


def _worker() -> dict:
    workers = heartbeat.workers_online()
    hosts = sorted({w["hostname"] for w in workers})
    queues = sorted({q for w in workers for q in w.get("queues", [])})
    if not hosts:
        return {"ok": False, "error": "no Celery worker heartbeat in the last "
                f"{settings.OVERLAP_WORKER_STALE_SECONDS} s", "workers": []}
    return {"workers": hosts, "queues": queues,
            "last_beat_s": round(time.time() - workers[0]["at"], 1)}


def health_report() -> dict:
    checks = {"database": _timed(_database), "redis": _timed(_redis)}
    if settings.OVERLAP_HEALTH_NEEDS_WORKER:
        checks["worker"] = (_timed(_worker) if checks["redis"]["ok"]
                            else {"ok": False, "error": "Redis is down"})
    status = "ok" if all(check["ok"] for check in checks.values()) else "down"
    return {"status": status, "checks": checks}
