"""The Celery app, configured from Django's settings (CELERY_* names).

Queues: `default` (simulated exercises' runs), `authoring` (authors' validations, so they
never delay a candidate's run), `recovery` (the `overlap.recover` beat task, never stuck
behind a backlog of runs), `gpu` (GPU exercises, consumed only by workers on a GPU host).
Celery beat sends `overlap.recover` every OVERLAP_RECOVER_EVERY_S seconds: nothing stays
stuck with nobody polling. A worker whose sandbox cannot run consumes none of the queues
whose jobs need one until it can (monitoring/worker_gate.py).
"""

import contextlib
import logging
import os
import sys

from celery import Celery
from celery.signals import worker_init

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "overlap.settings")

log = logging.getLogger(__name__)

app = Celery("overlap")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
app.steps["consumer"].add("monitoring.worker_gate:SandboxGate")


@app.task(name="overlap.health", time_limit=10, soft_time_limit=5)
def health(token: str = "ping") -> dict:
    """Answers from a worker: proves broker, worker and result backend work end to end."""
    return {"token": token, "worker": health.request.hostname}


@app.task(name="overlap.recover", time_limit=60, soft_time_limit=50, ignore_result=True)
def recover() -> dict:
    """Sent by Celery beat: re-send lost messages, retry or fail jobs whose worker died."""
    from overlap import jobs

    counts = jobs.recover_all()
    if any(any(kind.values()) for kind in counts.values()):
        log.info("recovered: %s", counts)
    return counts


@worker_init.connect
def _refuse_to_start_without_a_database(**kwargs) -> None:
    """A worker that cannot reach the database must not take messages it cannot handle:
    it stops here, loudly, before consuming anything."""
    from django.db import connection

    try:
        connection.ensure_connection()
        connection.close()
    except Exception as exc:
        log.critical("worker: the database cannot be reached (%s: %s); not starting",
                     type(exc).__name__, exc)
        print(f"overlap worker: the database cannot be reached ({exc}); not starting",
              file=sys.stderr, flush=True)
        raise SystemExit(3) from exc


@contextlib.contextmanager
def requeue_when_db_down(task, countdown: int = 10):
    """Inside a job task: a database that stopped answering sends the message back (later),
    instead of acking work that was never done."""
    from django.db import InterfaceError, OperationalError, close_old_connections

    try:
        yield
    except (OperationalError, InterfaceError) as exc:
        close_old_connections()
        log.warning("%s: database unavailable (%s); retrying in %ss", task.name, exc, countdown)
        raise task.retry(exc=exc, countdown=countdown, max_retries=60) from exc
