from celery import shared_task
from celery.signals import (
    worker_process_init,
    worker_process_shutdown,
    worker_ready,
    worker_shutdown,
)

from overlap.celery import requeue_when_db_down
from runs import sandbox, services


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
    sandbox.sandbox_pool_start()


@worker_process_shutdown.connect
@worker_shutdown.connect
def _drop_warm_sandboxes(**kwargs) -> None:
    """Warm sandboxes never outlive their worker."""
    sandbox.sandbox_pool_stop()
