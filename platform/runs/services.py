"""Runs: create (validated, one in flight, rate-limited), execute (claimed once), recover
(the shared job lifecycle: overlap/jobs.py).

The Celery task only calls run_execute; everything that decides lives here. Every change
of a run's status is pushed to its session's pad (``run`` events: the run's id and status,
nothing else), so the browsers fetch the verdict the moment it is stored instead of at
their next poll.
"""

import contextlib
import logging
import socket
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from interviews.push import broadcast
from overlap import jobs
from runs.models import Run
from runs.sandbox import SandboxFailure, grade_in_sandbox

log = logging.getLogger(__name__)


class RunRefused(Exception):
    """The run was not created; the message is for the person who clicked Run."""


def queue_for(version) -> str:
    return "gpu" if version.track == "gpu" else "default"


NO_GPU_WORKER = (
    "This exercise runs on a GPU, and no GPU worker is online to grade it, so the run "
    "cannot be graded now. Nothing counts against your code; tell your interviewer."
)


NO_WORKER_CAN_GRADE = (
    "No grading worker can run code right now (their sandboxes are not working), so the "
    "run cannot be graded now. Nothing counts against your code; tell your interviewer."
)
WAITING_FOR_A_WORKER = (
    "Waiting: no grading worker can run code right now (their sandboxes are not working). "
    "The run is graded as soon as one can; nothing counts against your code."
)


def gpu_worker_online() -> bool:
    from monitoring.heartbeat import queue_served

    return queue_served("gpu")


def workers_refuse(queue: str) -> bool:
    """Whether ``queue``'s jobs would only wait: every live worker there for it refuses
    work, its sandbox unusable (monitoring/worker_gate.py)."""
    from monitoring.heartbeat import queue_refusal

    return queue_refusal(queue) is not None


def run_create(*, session, code: str, requested_by: str) -> Run:
    size = len(code.encode())
    if size > settings.OVERLAP_MAX_CODE_BYTES:
        raise RunRefused(
            f"The code is {size / 1024:.0f} KiB; runs are limited to "
            f"{settings.OVERLAP_MAX_CODE_BYTES // 1024} KiB."
        )
    if not code.strip():
        raise RunRefused("There is no code to run.")
    if queue_for(session.exercise_version) == "gpu" and not gpu_worker_online():
        raise RunRefused(NO_GPU_WORKER)
    if workers_refuse(queue_for(session.exercise_version)):
        raise RunRefused(NO_WORKER_CAN_GRADE)
    from interviews.models import InterviewSession

    with transaction.atomic():
        # One writer per session at a time, so two quick clicks cannot both get through.
        InterviewSession.objects.select_for_update().filter(pk=session.pk).first()
        if session.runs.filter(status__in=Run.ACTIVE).exists():
            raise RunRefused("A run is already in progress; wait for its result.")
        window = timezone.now() - timedelta(seconds=60)
        if session.runs.filter(created_at__gte=window).count() >= settings.OVERLAP_RUNS_PER_MINUTE:
            raise RunRefused("Too many runs in the last minute; try again in a few seconds.")
        run = Run.objects.create(
            session=session,
            exercise_version=session.exercise_version,
            code=code,
            requested_by=requested_by,
            queue=queue_for(session.exercise_version),
        )
        transaction.on_commit(lambda: _enqueue_new(run))
        announce(run, run.status)
    return run


def announce(run: Run, status: str) -> None:
    """Tell the browsers on the run's session that its status is now ``status`` (after
    the commit).

    The event carries the run's id and status only: the candidate's socket hears it too,
    and what each side may see of a run is decided by the page it then fetches."""
    if run.session_id is not None:
        broadcast(run.session_id, "run", {"id": run.pk, "status": status})


def task_time_limit(run: Run) -> int:
    """Hard limit for the task: just above the sandbox's own (longer on the GPU queue)."""
    return settings.OVERLAP_GPU_TASK_TIME_LIMIT if run.queue == "gpu" else \
        settings.CELERY_TASK_TIME_LIMIT


def run_enqueue(*, run: Run, now=None) -> None:
    """Send the run's message (raises jobs.BrokerUnavailable at once when Redis is down)."""
    from runs.tasks import run_execute_task

    jobs.send(run_execute_task, Run, run.pk, queue=run.queue, time_limit=task_time_limit(run),
              now=now)


def _enqueue_new(run: Run) -> None:
    """After the commit: send, or, when the broker is down, fail the run at once so it
    never blocks the next one, and tell the person who clicked."""
    try:
        run_enqueue(run=run)
    except jobs.BrokerUnavailable:
        Run.objects.filter(pk=run.pk, status=Run.QUEUED).update(
            status=Run.INTERNAL_ERROR, verdict="internal_error",
            error="The broker (Redis) could not be reached; the run was never queued.",
            finished_at=timezone.now())
        announce(run, Run.INTERNAL_ERROR)
        raise


def run_execute(*, run_id: int) -> None:
    """Claim the run (queued -> running) and grade it. A run already claimed is left alone."""
    if not jobs.claim(Run.objects.filter(pk=run_id, status=Run.QUEUED),
                      status=Run.RUNNING, started_at=timezone.now(), heartbeat_at=timezone.now(),
                      attempts=jobs.bump_attempts(), worker=this_process()):
        log.info("run %s: not queued any more; nothing to do", run_id)
        return
    run = Run.objects.select_related("exercise_version").get(pk=run_id)
    announce(run, Run.RUNNING)
    with jobs.heartbeat(Run, run_id, running_status=Run.RUNNING):
        try:
            result = grade_in_sandbox(version=run.exercise_version, code=run.code)
        except SandboxFailure as exc:
            log.warning("run %s: sandbox failure: %s", run_id, exc)
            _finish(run, status=Run.INTERNAL_ERROR, error=str(exc))
            return
        except Exception as exc:  # never leave a run in "running" because of our own bug
            log.exception("run %s: internal error", run_id)
            _finish(run, status=Run.INTERNAL_ERROR, error=f"{type(exc).__name__}: {exc}")
            raise
    _finish(run, status=Run.DONE, result=result)


def _finish(run: Run, *, status: str, result: dict | None = None, error: str = "") -> None:
    verdict = (result or {}).get("verdict", "internal_error" if status != Run.DONE else "")
    finished = Run.objects.filter(pk=run.pk, status=Run.RUNNING).update(
        status=status,
        result=result,
        verdict=verdict,
        backend=(result or {}).get("sandbox", {}).get("backend", "") if result else "",
        error=error,
        finished_at=timezone.now(),
    )
    if finished:
        announce(run, status)


def runs_recover(*, now=None, run_ids=None) -> dict[str, int]:
    """Nothing stays stuck (the lifecycle in overlap/jobs.py): re-send queued runs whose
    message may be lost (e.g. Redis restarted empty), at most once per window; retry or
    fail runs whose worker stopped beating. Called by Celery beat and at worker start."""
    now = now or timezone.now()
    runs = Run.objects.all() if run_ids is None else Run.objects.filter(pk__in=run_ids)
    counts = {"requeued": 0, "retried": 0, "failed": 0}
    counts["failed"] += _answer_unserved_gpu_runs(runs, now)

    counts["requeued"], broker_up = jobs.requeue_lost(
        runs.filter(status=Run.QUEUED), lambda run: run_enqueue(run=run, now=now), now=now
    )
    if not broker_up:
        return counts  # the next beat tries again

    running = runs.filter(status=Run.RUNNING)
    dead = {run.pk: run for run in jobs.dead(running, now=now)}
    dead.update({run.pk: run for run in _crashed_here(running)})
    for run in dead.values():
        if jobs.attempts_left(run):
            if jobs.claim(Run.objects.filter(pk=run.pk, status=Run.RUNNING),
                          status=Run.QUEUED, heartbeat_at=None):
                with contextlib.suppress(jobs.BrokerUnavailable):  # re-sent when lost
                    run_enqueue(run=run, now=now)
                counts["retried"] += 1
                announce(run, Run.QUEUED)
        else:
            failed = Run.objects.filter(pk=run.pk, status=Run.RUNNING).update(
                status=Run.INTERNAL_ERROR,
                verdict="internal_error",
                error="The worker running this stopped before finishing (tried "
                      f"{run.attempts} times).",
                finished_at=now,
            )
            counts["failed"] += failed
            if failed:
                announce(run, Run.INTERNAL_ERROR)
    return counts


def this_process() -> str:
    """This worker process, uniquely: "<host>|<pid>:<start ticks>"."""
    from runner.sandbox.backends.base import process_token

    return f"{socket.gethostname()}|{process_token()}"


def _crashed_here(running) -> list[Run]:
    """Running rows whose grading process, on this host, is gone (killed, crashed): they
    are dead now, not once their heartbeat has been silent for OVERLAP_JOB_DEAD_AFTER_S."""
    from runner.sandbox.backends.base import token_alive

    host = socket.gethostname() + "|"
    return [run for run in running.filter(worker__startswith=host)
            if not token_alive(run.worker[len(host):])]


def runs_recover_crashed() -> dict[str, int]:
    """At a worker process's start (Celery starts one when another died): its dead
    siblings' runs are retried now, within seconds of the crash."""
    crashed = [run.pk for run in _crashed_here(Run.objects.filter(status=Run.RUNNING))]
    if not crashed:
        return {"requeued": 0, "retried": 0, "failed": 0}
    return runs_recover(run_ids=crashed)


def _answer_unserved_gpu_runs(runs, now, *, waited_s: int | None = None,
                              message: str = "") -> int:
    """GPU runs queued longer than ``waited_s`` (OVERLAP_GPU_QUEUE_WAIT_SECONDS) while no
    GPU worker is online get the runner's own "Needs a GPU" answer (a skip, not a failure),
    instead of showing "Queued" for ever and blocking the session's next run."""
    from runner.contract import empty_metrics, make_result

    waited_s = settings.OVERLAP_GPU_QUEUE_WAIT_SECONDS if waited_s is None else waited_s
    waited = now - timedelta(seconds=waited_s)
    stale = list(runs.filter(status=Run.QUEUED, queue="gpu", created_at__lte=waited)
                 .select_related("exercise_version__exercise"))
    if not stale or gpu_worker_online():
        return 0
    answered = 0
    message = message or (
        f"This exercise runs on a GPU, and no GPU worker took the run within {waited_s} s, "
        "so it was not graded. Nothing counts against your code; run it again once your "
        "interviewer says a GPU worker is online.")
    for run in stale:
        result = make_result(exercise=run.exercise_version.exercise.slug, verdict="needs_gpu",
                             message=message, metrics=empty_metrics())
        updated = Run.objects.filter(pk=run.pk, status=Run.QUEUED).update(
            status=Run.DONE, result=result, verdict="needs_gpu", finished_at=now)
        if updated:
            answered += 1
            announce(run, Run.DONE)
    return answered


SESSION_ENDED_WITHOUT_GPU = (
    "The session ended before a GPU worker took this run (none was online), so it was "
    "not graded."
)


def runs_settle_at_end(*, session, now=None) -> int:
    """When a session ends: its GPU runs that no GPU worker can take are answered now
    ("Needs a GPU", with the reason), so the scorecard never lists one as "Queued"."""
    return _answer_unserved_gpu_runs(session.runs.all(), now or timezone.now(), waited_s=0,
                                     message=SESSION_ENDED_WITHOUT_GPU)
