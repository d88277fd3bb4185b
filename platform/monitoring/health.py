"""What /healthz checks: the database (it reads and it writes), Redis, and a Celery
worker that beat recently, takes the `default` queue (candidates' runs) and can grade."""

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


RUN_QUEUE = "default"  # candidates' runs (CPU exercises): the queue the site cannot do without


def _grading_problem(host: str, workers: list[dict], serving: dict[str, set[str]],
                     refusing: dict[str, str]) -> str | None:
    """Why this worker (every process of one host name) cannot grade candidates' runs
    (None: it can). One that refuses the queue (its main process's sandbox gate decides)
    cannot; else its processes' sandbox reports say, of which one that can grade (or has
    not reported yet) is enough."""
    if RUN_QUEUE not in serving.get(host, set()):
        return refusing.get(host) or f"it does not take the {RUN_QUEUE} queue now"
    found = [sandbox_problem(w) for w in workers if w["hostname"] == host]
    return None if not all(found) else found[0]


def _worker() -> dict:
    workers = heartbeat.workers_online()
    hosts = sorted({w["hostname"] for w in workers})
    queues = sorted({q for w in workers for q in w.get("queues", [])})
    if not hosts:
        return {"ok": False, "error": "no Celery worker heartbeat in the last "
                f"{settings.OVERLAP_WORKER_STALE_SECONDS} s", "workers": []}
    # A worker that refuses work (monitoring/worker_gate.py) says why in its heartbeat.
    refusing = heartbeat.refusals(workers)
    details = {"workers": hosts, "queues": queues, **({"refusing": refusing} if refusing
                                                       else {})}
    # Candidates' runs need a worker that takes their queue and can grade: an authors'
    # or a GPU worker alone, or one that refuses work, leaves every Run waiting.
    serving = heartbeat.serving(workers)
    for_runs = sorted({w["hostname"] for w in workers if RUN_QUEUE in w.get("queues", [])})
    if not for_runs:
        taken = "; ".join(f"{host} takes {', '.join(sorted(serving.get(host, set()))) or 'none'}"
                          for host in hosts)
        return {"ok": False, **details, "error": f"no worker takes the {RUN_QUEUE} queue "
                f"(candidates' runs): {taken}"[:300]}
    problems = {host: _grading_problem(host, workers, serving, refusing) for host in for_runs}
    if all(problems.values()):  # every worker there for the runs cannot grade them
        host, why = sorted(problems.items())[0]
        return {"ok": False, **details, "error": "no worker can grade candidates' runs "
                f"({RUN_QUEUE} queue): {host}: {why}"[:400]}
    newest = next(w for w in workers if not problems.get(w["hostname"], "not for runs"))
    return {**details, "last_beat_s": round(time.time() - newest["at"], 1)}


def health_report() -> dict:
    checks = {"database": _timed(_database), "redis": _timed(_redis)}
    if settings.OVERLAP_HEALTH_NEEDS_WORKER:
        checks["worker"] = (_timed(_worker) if checks["redis"]["ok"]
                            else {"ok": False, "error": "Redis is down"})
    status = "ok" if all(check["ok"] for check in checks.values()) else "down"
    return {"status": status, "checks": checks}
