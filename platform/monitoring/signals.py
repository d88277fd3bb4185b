"""Hooks into Celery and the Run model; connected when the app is ready (web and worker).

- a worker (and each of its pool processes) writes a heartbeat to Redis;
- records logged while `runs.execute` runs carry the run's id;
- a finished run is observed for /metrics once (a post_save on Run, and after the task,
  since the run services finish runs with a guarded UPDATE that sends no signal);
- warnings from the sandbox layers count as sandbox failures.
"""

import logging

from celery.signals import (
    celeryd_init,
    task_postrun,
    task_prerun,
    worker_process_init,
    worker_process_shutdown,
    worker_ready,
    worker_shutdown,
)
from django.db.models.signals import post_save
from django.dispatch import receiver

from monitoring import metrics
from monitoring.heartbeat import Heartbeat
from security.logs import run_logging_context

log = logging.getLogger(__name__)
RUN_TASK = "runs.execute"
SANDBOX_LOGGERS = ("runner.sandbox", "runs.sandbox")

_heartbeats: list[Heartbeat] = []
_hostname = {"name": "worker"}  # set before the pool forks, so children know it too
_run_contexts: dict[str, object] = {}


def _consumed_queues() -> list[str]:
    """The queues this worker consumes (-Q), as selected on the app when it started."""
    from celery import current_app

    try:
        queues = current_app.amqp.queues
        selected = getattr(queues, "consume_from", None) or queues
        return sorted(selected)
    except Exception:
        return []


def _start_heartbeat(hostname: str) -> None:
    """One heartbeat per process: a newer worker in the same process (a solo pool gets
    both signals; a worker restarted in a thread) replaces the older one."""
    import os

    for old in [h for h in _heartbeats if h.pid == os.getpid()]:
        _heartbeats.remove(old)
        old.stop()
    _heartbeats.append(Heartbeat(hostname=hostname, queues=_consumed_queues()).start())


@celeryd_init.connect
def _worker_init(sender=None, **kwargs) -> None:
    _hostname["name"] = sender or _hostname["name"]


@worker_ready.connect
def _worker_ready(sender=None, **kwargs) -> None:
    hostname = getattr(sender, "hostname", None) or _hostname["name"]
    _hostname["name"] = hostname
    _start_heartbeat(hostname)
    _count_sandbox_warnings()


@worker_process_init.connect
def _pool_process_init(sender=None, **kwargs) -> None:
    """Pool processes (prefork children, or the solo pool's one) hold the warm sandbox
    pools: each reports its own. Celery passes the worker's hostname as the sender."""
    import os

    # Inherited from the parent over fork: not ours to stop.
    _heartbeats[:] = [h for h in _heartbeats if h.pid == os.getpid()]
    _start_heartbeat(sender if isinstance(sender, str) and sender else _hostname["name"])
    _count_sandbox_warnings()


@worker_process_shutdown.connect
@worker_shutdown.connect
def _worker_stops(**kwargs) -> None:
    while _heartbeats:
        _heartbeats.pop().stop()


@task_prerun.connect
def _run_task_starts(task_id=None, task=None, args=None, kwargs=None, **extra) -> None:
    if getattr(task, "name", "") != RUN_TASK:
        return
    run_id = (kwargs or {}).get("run_id", (args or [None])[0])
    context = run_logging_context(run_id)
    context.__enter__()
    _run_contexts[task_id] = context


@task_postrun.connect
def _run_task_ends(task_id=None, task=None, args=None, kwargs=None, **extra) -> None:
    if getattr(task, "name", "") != RUN_TASK:
        return
    context = _run_contexts.pop(task_id, None)
    run_id = (kwargs or {}).get("run_id", (args or [None])[0])
    try:
        if run_id is not None:
            _observe(run_id)
    finally:
        if context is not None:
            context.__exit__(None, None, None)


def _observe(run_id: int) -> None:
    from runs.models import Run

    run = Run.objects.filter(pk=run_id).first()
    if run is not None:
        try:
            metrics.observe_run_finished(run)
        except Exception as exc:  # metrics must never fail a run
            log.warning("could not observe run %s: %s", run_id, exc)


@receiver(post_save, sender="runs.Run", dispatch_uid="monitoring.observe_run")
def _run_saved(sender, instance, **kwargs) -> None:
    if instance.status in ("done", "internal_error") and instance.finished_at:
        try:
            metrics.observe_run_finished(instance)
        except Exception as exc:
            log.warning("could not observe run %s: %s", instance.pk, exc)


class SandboxFailureCounter(logging.Handler):
    """WARNING and worse from the sandbox layers (a pooled sandbox that would not start,
    no warm pool) count as sandbox failures, by logger."""

    def __init__(self):
        super().__init__(level=logging.WARNING)

    def emit(self, record: logging.LogRecord) -> None:
        metrics.record_sandbox_failure(record.name.rsplit(".", 1)[-1])


def _count_sandbox_warnings() -> None:
    for name in SANDBOX_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(h, SandboxFailureCounter) for h in logger.handlers):
            logger.addHandler(SandboxFailureCounter())
