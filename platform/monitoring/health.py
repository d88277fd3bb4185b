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


def sandbox_problem(worker: dict) -> str | None:
    """Why this worker cannot grade, from the sandbox report in its heartbeat (None: it
    can, or it has not reported yet)."""
    report = worker.get("sandbox_report") or {}
    if not report:
        return None
    if report.get("error"):
        return f"its sandbox check failed ({report['error']})"
    chosen = report.get("chosen")
    if not chosen:
        problems = report.get("problems") or {}
        named = report.get("configured") or "auto"
        why = problems.get(named) or "; ".join(f"{k}: {v}" for k, v in problems.items() if v)
        return f"no sandbox it may use works ({named}: {why})"[:300]
    image = report.get("image") or {}
    if chosen == "docker" and image.get("present") is False:
        return f"the sandbox image {image.get('name')} is missing (docker/sandbox/build.sh)"
    if chosen == "docker" and image.get("fresh") is False:
        return (f"the sandbox image {image.get('name')} was built from other runner "
                "sources (rebuild it: docker/sandbox/build.sh)")
    return None


def _worker() -> dict:
    workers = heartbeat.workers_online()
    hosts = sorted({w["hostname"] for w in workers})
    queues = sorted({q for w in workers for q in w.get("queues", [])})
    if not hosts:
        return {"ok": False, "error": "no Celery worker heartbeat in the last "
                f"{settings.OVERLAP_WORKER_STALE_SECONDS} s", "workers": []}
    problems = {w["hostname"]: sandbox_problem(w) for w in workers}
    if all(problems.values()):  # every worker online reports it cannot run a sandbox
        host, why = sorted(problems.items())[0]
        return {"ok": False, "workers": hosts, "queues": queues,
                "error": f"no worker can grade: {host}: {why}"}
    return {"workers": hosts, "queues": queues,
            "last_beat_s": round(time.time() - workers[0]["at"], 1)}


def health_report() -> dict:
    checks = {"database": _timed(_database), "redis": _timed(_redis)}
    if settings.OVERLAP_HEALTH_NEEDS_WORKER:
        checks["worker"] = (_timed(_worker) if checks["redis"]["ok"]
                            else {"ok": False, "error": "Redis is down"})
    status = "ok" if all(check["ok"] for check in checks.values()) else "down"
    return {"status": status, "checks": checks}
