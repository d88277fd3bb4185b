"""Reads for runs: what the run panel shows (the same for candidate and interviewer)."""

from django.utils import timezone
from django.utils.safestring import mark_safe

from runs.labels import VERDICT_LABELS, verdict_label
from runs.models import Run
from runs.timeline import timeline_svg

VERDICT_TEXT = VERDICT_LABELS  # kept for callers of the old name


def run_view(run: Run) -> dict:
    result = run.result or {}
    elapsed_from = run.started_at or run.created_at
    elapsed_to = run.finished_at or timezone.now()
    return {
        "run": run,
        "active": run.is_active,
        "elapsed": max(0.0, (elapsed_to - elapsed_from).total_seconds()),
        "waiting": _waiting(run),
        "ahead": _ahead(run),
        "verdict_text": verdict_label(run.verdict),
        "error_line": _error_line(result),
        "passed": result.get("status") == "pass",
        "skipped": result.get("status") == "skip",  # e.g. needs_gpu: not a failure
        "message": result.get("message", "") if run.status == Run.DONE else (
            "Something went wrong on our side while running your code. It was not your "
            "code's fault; please run it again." if run.status == Run.INTERNAL_ERROR else ""),
        "checks": result.get("checks") or [],
        "metrics": result.get("metrics") or {},
        "stdout": result.get("stdout", ""),
        "stderr": result.get("stderr", ""),
        "backend": run.backend,
        "isolated": run.backend not in ("process",),
        "timeline": mark_safe(timeline_svg(result.get("trace"))),
    }


def _ahead(run: Run) -> int:
    """Runs of the same queue that were queued before this one and wait still: what the
    candidate waits for ("Queued (2 ahead)")."""
    if run.status != Run.QUEUED:
        return 0
    return Run.objects.filter(status=Run.QUEUED, queue=run.queue,
                              created_at__lt=run.created_at).count()


def _waiting(run: Run) -> str:
    """Why a queued run is not taken, when every worker there for its queue refuses work
    (its sandbox unusable): said next to "Queued", rather than nothing."""
    if run.status != Run.QUEUED:
        return ""
    from runs import services

    return services.WAITING_FOR_A_WORKER if services.workers_refuse(run.queue) else ""


def _error_line(result: dict) -> int | None:
    """The line of the candidate's code a syntax/runtime error points at, if any."""
    error = result.get("error")
    line = error.get("line") if isinstance(error, dict) else None
    return line if isinstance(line, int) and not isinstance(line, bool) and line > 0 else None
