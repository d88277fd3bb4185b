from django.conf import settings
from django.utils.functional import SimpleLazyObject


def run_poll(request) -> dict:
    """How often a page polls a run in progress when its pad socket brings no news (the
    socket pushes every change of a run's status; the poll is the fallback)."""
    return {"run_poll_ms": settings.OVERLAP_RUN_POLL_MS}


def gpu_workers(request) -> dict:
    """``gpu_worker_online``: whether a live worker takes the `gpu` queue (the workers'
    heartbeats), asked once per page and only by a page that shows a GPU exercise."""
    from runs.services import gpu_worker_online

    return {"gpu_worker_online": SimpleLazyObject(gpu_worker_online)}
