from django.conf import settings


def run_poll(request) -> dict:
    """How often a page polls a run in progress when its pad socket brings no news (the
    socket pushes every change of a run's status; the poll is the fallback)."""
    return {"run_poll_ms": settings.OVERLAP_RUN_POLL_MS}
