"""What /healthz checks: the database (it reads and it writes), Redis, and a Celery
worker that beat recently."""

import time

from django.conf import settings
from django.db import DatabaseError, connection, transaction
from django.utils import timezone

from monitoring import heartbeat, store
from monitoring.models import HealthProbe


def _timed(check) -> dict:
    started = time.monotonic()
    try:
        details = check() or {}
        ok = details.pop("ok", True)
    except Exception as exc:
        ok, details = False, {"error": f"{type(exc).__name__}: {exc}"[:300]}
    return {"ok": ok, "ms": round((time.monotonic() - started) * 1000, 1), **details}


def database_write_problem() -> str | None:
    """Why the database refuses a write (None: it takes one). Writes the one probe row and
    deletes it again in one transaction, and commits: a read-only database (a PostgreSQL
    standby, `default_transaction_read_only`; a SQLite file opened read-only) answers
    reads, and a full disk takes a write and fails only when it is committed (SQLite keeps
    an uncommitted change in memory), so only a commit shows that every page that saves
    something is down. The table stays empty."""
    try:
        with transaction.atomic():
            HealthProbe.objects.create(pk=1, checked_at=timezone.now())
            HealthProbe.objects.filter(pk=1).delete()
    except DatabaseError as exc:
        # Django wraps the driver's error; the driver's class names the problem
        # (ReadOnlySqlTransaction, DiskFull, OperationalError: readonly database...).
        cause = exc.__cause__ if isinstance(exc.__cause__, Exception) else exc
        message = (str(cause).strip().splitlines() or [""])[0]
        return f"database cannot write: {type(cause).__name__}: {message}"[:300]
    return None


def _database() -> dict:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    problem = database_write_problem()
    return {"ok": False, "error": problem} if problem else {}


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
    if chosen == "docker" and image.get("fresh") is False and not image.get("stale_allowed"):
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
    # A worker that refuses work (monitoring/worker_gate.py) says why in its heartbeat.
    refusing = heartbeat.refusals(workers)
    problems = {w["hostname"]: refusing.get(w["hostname"]) or sandbox_problem(w)
                for w in workers}
    details = {"workers": hosts, "queues": queues, **({"refusing": refusing} if refusing
                                                       else {})}
    if all(problems.values()):  # every worker online reports it cannot run a sandbox
        host, why = sorted(problems.items())[0]
        return {"ok": False, **details, "error": f"no worker can grade: {host}: {why}"}
    return {**details, "last_beat_s": round(time.time() - workers[0]["at"], 1)}


def health_report() -> dict:
    checks = {"database": _timed(_database), "redis": _timed(_redis)}
    if settings.OVERLAP_HEALTH_NEEDS_WORKER:
        checks["worker"] = (_timed(_worker) if checks["redis"]["ok"]
                            else {"ok": False, "error": "Redis is down"})
    status = "ok" if all(check["ok"] for check in checks.values()) else "down"
    return {"status": status, "checks": checks}
