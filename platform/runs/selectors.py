"""Reads for runs: what the run panel shows (the same for candidate and interviewer)."""

from django.utils import timezone
from django.utils.safestring import mark_safe

from runs.models import Run
from runs.timeline import timeline_svg

VERDICT_TEXT = {
    "accepted": "Accepted",
    "wrong": "Wrong result",
    "too_slow": "Correct, but not fast enough",
    "timeout": "Timed out",
    "syntax_error": "Syntax error",
    "runtime_error": "Runtime error",
    "missing_entry_point": "Missing entry point",
    "memory_limit": "Memory limit exceeded",
    "output_limit": "Too much output",
    "disk_limit": "Disk limit exceeded",
    "process_limit": "Too many processes",
    "needs_gpu": "Needs a GPU",
    "internal_error": "Internal error",
}


def run_view(run: Run) -> dict:
    result = run.result or {}
    elapsed_from = run.started_at or run.created_at
    elapsed_to = run.finished_at or timezone.now()
    return {
        "run": run,
        "active": run.is_active,
        "elapsed": max(0.0, (elapsed_to - elapsed_from).total_seconds()),
        "verdict_text": VERDICT_TEXT.get(run.verdict, run.verdict.replace("_", " ").capitalize()),
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
