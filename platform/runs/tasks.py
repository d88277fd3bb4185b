import logging

from celery import shared_task
from celery.signals import (
    worker_process_init,
    worker_process_shutdown,
    worker_ready,
    worker_shutdown,
)

from overlap.celery import requeue_when_db_down
from runs import sandbox, services

log = logging.getLogger(__name__)


@shared_task(name="runs.execute", bind=True, acks_late=True, reject_on_worker_lost=True,
             ignore_result=True)
def run_execute_task(self, run_id: int) -> None:
    with requeue_when_db_down(self):
        services.run_execute(run_id=run_id)


@worker_ready.connect
def _recover_on_start(**kwargs) -> None:
    """A worker that starts cleans up what its dead predecessors left (their sandboxes,
    never another live worker's) and finishes their runs."""
    sandbox.sandbox_reap()
    services.runs_recover()


@worker_process_init.connect
def _warm_sandboxes(**kwargs) -> None:
    # Celery starts a pool process when another died (killed, out of memory): what the
    # dead one left is cleaned up and its run retried now, not at the next worker start.
    try:
        sandbox.sandbox_reap()
        services.runs_recover_crashed()
    except Exception:  # a broken clean-up must not stop the process from serving
        log.warning("clean-up after a dead worker process failed", exc_info=True)
    sandbox.sandbox_pool_start()


@worker_process_shutdown.connect
@worker_shutdown.connect
def _drop_warm_sandboxes(**kwargs) -> None:
    """Warm sandboxes never outlive their worker."""
    sandbox.sandbox_pool_stop()
