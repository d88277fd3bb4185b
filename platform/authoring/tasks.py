from celery import shared_task
from celery.signals import worker_ready

from authoring import services
from overlap.celery import requeue_when_db_down


@shared_task(name="authoring.validation_step", bind=True, acks_late=True,
             reject_on_worker_lost=True, ignore_result=True)
def validation_step_task(self, validation_id: int) -> None:
    with requeue_when_db_down(self):
        services.validation_step(validation_id=validation_id)


@worker_ready.connect
def _recover_on_start(**kwargs) -> None:
    """A worker that starts finishes the validations a dead one left behind."""
    services.validations_recover()
