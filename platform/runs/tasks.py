from celery import shared_task
from celery.signals import worker_ready

from runs import services


@shared_task(name="runs.execute", acks_late=True, reject_on_worker_lost=True)
def run_execute_task(run_id: int) -> None:
    services.run_execute(run_id=run_id)


@worker_ready.connect
def _recover_on_start(**kwargs) -> None:
    """A worker that starts finishes what a dead one left behind."""
    services.runs_recover()
