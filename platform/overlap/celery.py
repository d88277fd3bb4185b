"""The Celery app, configured from Django's settings (CELERY_* names)."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "overlap.settings")

app = Celery("overlap")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@app.task(name="overlap.health", time_limit=10, soft_time_limit=5)
def health(token: str = "ping") -> dict:
    """Answers from a worker: proves broker, worker and result backend work end to end."""
    return {"token": token, "worker": health.request.hostname}
