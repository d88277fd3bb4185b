"""Runs: validated, one in flight, rate-limited, claimed once, never left stuck."""

from datetime import timedelta

import pytest
import redis
from django.conf import settings
from django.utils import timezone

from runs import services
from runs.models import Run

pytestmark = pytest.mark.django_db


def _queue_length(name: str = "default") -> int:
    return redis.Redis.from_url(settings.CELERY_BROKER_URL).llen(name)


def _lose_messages(name: str = "default") -> None:
    """What a Redis restarted empty does to a queue (this test database's own Redis)."""
    redis.Redis.from_url(settings.CELERY_BROKER_URL).delete(name)


def test_candidate_run_is_queued_and_shows_progress(client, live_session):
    response = client.post(f"/c/{live_session.token}/run/", {"code": "x = 1\n"})
    html = response.content.decode()
    run = live_session.runs.get()
    assert run.status == Run.QUEUED and run.code == "x = 1\n" and run.requested_by == "candidate"
    assert "Queued" in html
    assert f'hx-get="/c/{live_session.token}/runs/{run.pk}/"' in html
    # The code that ran is also a saved revision, for the replay.
    assert live_session.revisions.filter(code="x = 1\n").exists()


def test_a_queued_run_says_how_many_runs_wait_before_it(client, live_session, interviewer):
    from interviews import services as interviews

    other = interviews.session_create(interviewer=interviewer,
                                      exercise=live_session.exercise_version.exercise,
                                      candidate_name="Ada", candidate_email="ada@example.org")
    interviews.session_start(session=other)
    other.refresh_from_db()
    client.post(f"/c/{other.token}/run/", {"code": "x = 1\n"})  # queued first
    html = client.post(f"/c/{live_session.token}/run/", {"code": "x = 2\n"}).content.decode()
    assert "Queued (1 ahead)" in html
    mine = live_session.runs.get()
    assert "ahead" not in client.get(f"/c/{other.token}/runs/{other.runs.get().pk}/")\
        .content.decode()  # the first in line has nobody ahead
    other.runs.update(status=Run.DONE)
    page = client.get(f"/c/{live_session.token}/runs/{mine.pk}/").content.decode()
    assert "Queued" in page and "ahead" not in page


def test_only_one_run_in_flight_per_session(client, live_session):
    client.post(f"/c/{live_session.token}/run/", {"code": "x = 1\n"})
    second = client.post(f"/c/{live_session.token}/run/", {"code": "x = 2\n"}).content.decode()
    assert "already in progress" in second
    assert live_session.runs.count() == 1


def test_runs_are_rate_limited_per_session(client, live_session, settings):
    settings.OVERLAP_RUNS_PER_MINUTE = 2
    for i in range(2):
        client.post(f"/c/{live_session.token}/run/", {"code": f"x = {i}\n"})
        live_session.runs.update(status=Run.DONE)
    third = client.post(f"/c/{live_session.token}/run/", {"code": "x = 9\n"}).content.decode()
    assert "Too many runs" in third
    assert live_session.runs.count() == 2


def test_oversized_code_is_refused_before_any_sandbox(client, live_session, settings):
    settings.OVERLAP_MAX_CODE_BYTES = 100
    html = client.post(f"/c/{live_session.token}/run/", {"code": "#" * 500}).content.decode()
    assert "limited to" in html or "larger than" in html
    assert live_session.runs.count() == 0


def test_gpu_exercises_go_to_the_gpu_queue(live_session):
    version = live_session.exercise_version
    version.track = "gpu"
    assert services.queue_for(version) == "gpu"
    version.track = "simulated"
    assert services.queue_for(version) == "default"


def test_a_claimed_run_is_never_run_twice(live_session):
    run = Run.objects.create(session=live_session, exercise_version=live_session.exercise_version,
                             code="x = 1\n", status=Run.RUNNING, attempts=1,
                             started_at=timezone.now())
    services.run_execute(run_id=run.pk)  # a redelivered message
    run.refresh_from_db()
    assert (run.status, run.attempts, run.result) == (Run.RUNNING, 1, None)


def _old(minutes=10):
    return timezone.now() - timedelta(minutes=minutes)


def test_a_queued_run_whose_message_was_lost_is_enqueued_again(live_session):
    run = Run.objects.create(session=live_session, exercise_version=live_session.exercise_version,
                             code="x = 1\n")
    Run.objects.filter(pk=run.pk).update(created_at=_old())
    _lose_messages()
    counts = services.runs_recover(run_ids=[run.pk])
    assert counts["requeued"] == 1
    assert _queue_length() == 1


def test_a_run_whose_worker_died_is_retried_then_failed_clearly(live_session):
    run = Run.objects.create(session=live_session, exercise_version=live_session.exercise_version,
                             code="x = 1\n", status=Run.RUNNING, attempts=1, started_at=_old())
    assert services.runs_recover(run_ids=[run.pk])["retried"] == 1
    run.refresh_from_db()
    assert run.status == Run.QUEUED

    Run.objects.filter(pk=run.pk).update(status=Run.RUNNING, attempts=2, started_at=_old())
    assert services.runs_recover(run_ids=[run.pk])["failed"] == 1
    run.refresh_from_db()
    assert run.status == Run.INTERNAL_ERROR and run.verdict == "internal_error"
    assert "stopped before finishing" in run.error


def test_polling_never_recovers_but_celery_beats_task_does(client, live_session):
    """Recovery is Celery beat's job: a GET is a read (16 sessions x polls must never flood
    the broker); the beat task `overlap.recover` fails the stuck run clearly."""
    from overlap.celery import recover

    run = Run.objects.create(session=live_session, exercise_version=live_session.exercise_version,
                             code="x = 1\n", status=Run.RUNNING, attempts=2, started_at=_old())
    html = client.get(f"/c/{live_session.token}/runs/{run.pk}/").content.decode()
    assert "Running" in html
    run.refresh_from_db()
    assert run.status == Run.RUNNING

    assert recover.apply().get()["runs"]["failed"] == 1
    html = client.get(f"/c/{live_session.token}/runs/{run.pk}/").content.decode()
    assert "Internal error" in html
    assert "not your code" in html.lower() or "not your\n" in html.lower() or "fault" in html


def test_a_lost_run_is_sent_again_at_most_once_per_window(live_session):
    """Recovery itself must not flood the broker: however often it runs, a queued run gets
    one more message per staleness window."""
    run = Run.objects.create(session=live_session, exercise_version=live_session.exercise_version,
                             code="x = 1\n")
    Run.objects.filter(pk=run.pk).update(created_at=_old(), last_enqueued_at=_old())
    _lose_messages()  # Redis restarted empty
    sent = [services.runs_recover()["requeued"] for _ in range(20)]
    assert sent == [1] + [0] * 19
    assert _queue_length() == 1
    # A window later its message is still waiting in the queue (a long queue, not a lost
    # one): nothing is sent.
    later = timezone.now() + timedelta(seconds=settings.OVERLAP_RUN_REQUEUE_AFTER + 1)
    assert services.runs_recover(now=later)["requeued"] == 0
    # Lost again: sent once more.
    _lose_messages()
    assert services.runs_recover(now=later)["requeued"] == 1
    assert services.runs_recover(now=later)["requeued"] == 0


def test_a_running_run_whose_worker_still_beats_is_left_alone(live_session):
    """A long run (up to the task's time limit) is alive while its worker beats."""
    run = Run.objects.create(session=live_session, exercise_version=live_session.exercise_version,
                             code="x = 1\n", status=Run.RUNNING, attempts=1, started_at=_old(),
                             heartbeat_at=timezone.now())
    assert services.runs_recover(run_ids=[run.pk]) == {"requeued": 0, "retried": 0, "failed": 0}
    Run.objects.filter(pk=run.pk).update(heartbeat_at=_old(1))
    assert services.runs_recover(run_ids=[run.pk])["retried"] == 1


@pytest.mark.django_db(transaction=True)  # real commits: the message is sent after one
def test_a_run_while_the_broker_is_down_says_so_at_once_and_blocks_nothing(client, live_session):
    """Redis down: a clear 503 message within a second, no debug page, and the run is not
    left queued (the next Run, with Redis back, goes through)."""
    import time

    from overlap.celery import app

    # The app's connection pools are rebuilt for a broker where nothing listens (the
    # discard port), then put back. tests/faults/ does the same with a real Redis killed.
    saved = (app.conf.broker_url, app._pool, app.amqp._producer_pool)
    app.conf.broker_url, app._pool, app.amqp._producer_pool = "redis://127.0.0.1:9/0", None, None
    try:
        started = time.monotonic()
        response = client.post(f"/c/{live_session.token}/run/", {"code": "x = 1\n"})
        elapsed = time.monotonic() - started
    finally:
        app.conf.broker_url, app._pool, app.amqp._producer_pool = saved
    assert response.status_code == 503
    assert "unavailable right now" in response.content.decode()
    assert elapsed < 3, elapsed
    assert live_session.runs.get().status == Run.INTERNAL_ERROR

    html = client.post(f"/c/{live_session.token}/run/", {"code": "x = 2\n"}).content.decode()
    assert "Queued" in html
    assert live_session.runs.filter(status=Run.QUEUED).count() == 1


def test_a_candidate_cannot_poll_another_sessions_run(client, live_session, interviewer):
    from interviews import services as session_services

    other = session_services.session_create(
        interviewer=interviewer, exercise=live_session.exercise_version.exercise,
        candidate_name="Other", candidate_email="o@example.org")
    run = Run.objects.create(session=other, exercise_version=other.exercise_version, code="x")
    assert client.get(f"/c/{live_session.token}/runs/{run.pk}/").status_code == 404


def test_a_runs_status_shows_neither_its_code_nor_after_the_link_expired(client, live_session):
    run = Run.objects.create(session=live_session, exercise_version=live_session.exercise_version,
                             code="SECRET_MARKER = 1", status=Run.RUNNING)
    url = f"/c/{live_session.token}/runs/{run.pk}/"
    html = client.get(url).content.decode()
    assert "run-active" in html and "SECRET_MARKER" not in html
    live_session.ended_at = timezone.now() - timedelta(
        hours=settings.OVERLAP_CANDIDATE_LINK_HOURS + 1)
    live_session.save(update_fields=["ended_at"])
    assert client.get(url).status_code == 404


def test_gpu_runs_get_the_longer_task_limit_and_needs_gpu_is_not_a_failure(live_session):
    from runs.selectors import run_view

    run = Run.objects.create(session=live_session, exercise_version=live_session.exercise_version,
                             code="x", queue="gpu")
    assert services.task_time_limit(run) == settings.OVERLAP_GPU_TASK_TIME_LIMIT
    assert services.task_time_limit(run) > settings.CELERY_TASK_TIME_LIMIT
    Run.objects.filter(pk=run.pk).update(
        status=Run.DONE, verdict="needs_gpu",
        result={"status": "skip", "verdict": "needs_gpu", "message": "No GPU here."})
    view = run_view(Run.objects.get(pk=run.pk))
    assert view["verdict_text"] == "Needs a GPU"
    assert view["skipped"] and not view["passed"]


def test_a_failed_run_carries_its_error_line_and_no_half_filled_times(client, live_session):
    client.post(f"/c/{live_session.token}/run/", {"code": "x = 1\nboom()\n"})
    run = live_session.runs.get()
    type(run).objects.filter(pk=run.pk).update(status="done", verdict="runtime_error", result={
        "status": "error", "verdict": "runtime_error", "message": "NameError: boom",
        "checks": [], "metrics": {"baseline_time": 1.5, "candidate_time": None},
        "trace": {"baseline": {"makespan": 1.0, "spans": []}, "candidate": None},
        "error": {"type": "exception", "line": 2, "traceback": "..."}})
    html = client.get(f"/c/{live_session.token}/runs/{run.pk}/").content.decode()
    assert 'data-error-line="2"' in html and "line 2" in html
    assert "yours" not in html and "<svg" not in html  # no "yours s", no empty chart


def test_a_refused_run_is_said_beside_the_button_and_keeps_the_results(client, live_session):
    """htmx: the refusal is retargeted to #run-refused, so the pane keeps the verdict."""
    client.post(f"/c/{live_session.token}/run/", {"code": "x = 1\n"}, HTTP_HX_REQUEST="true")
    second = client.post(f"/c/{live_session.token}/run/", {"code": "x = 2\n"},
                         HTTP_HX_REQUEST="true")
    assert second.status_code == 200
    assert second["HX-Retarget"] == "#run-refused"
    assert second["HX-Reswap"] == "textContent"
    assert "already in progress" in second.content.decode()


def _gpu(session):
    version = session.exercise_version
    version.track = "gpu"
    version.save(update_fields=["track"])
    exercise = version.exercise
    exercise.track = "gpu"
    exercise.save(update_fields=["track"])
    return version


def test_without_a_gpu_worker_a_gpu_run_is_refused_at_once(client, live_session):
    _gpu(live_session)
    response = client.post(f"/c/{live_session.token}/run/", {"code": "x = 1\n"},
                           HTTP_HX_REQUEST="true")
    assert "no GPU worker is online" in response.content.decode()
    assert live_session.runs.count() == 0


def test_with_a_gpu_worker_online_a_gpu_run_is_queued_for_it(client, live_session):
    from monitoring.heartbeat import beat, forget

    _gpu(live_session)
    beat(hostname="gpu-host", queues=["gpu"], pid=4242)
    try:
        client.post(f"/c/{live_session.token}/run/", {"code": "x = 1\n"})
        assert live_session.runs.get().queue == "gpu"
    finally:
        forget(hostname="gpu-host", pid=4242)


def test_a_queued_gpu_run_nobody_takes_gets_needs_gpu_after_a_bounded_wait(
        live_session, settings):
    settings.OVERLAP_GPU_QUEUE_WAIT_SECONDS = 60
    version = _gpu(live_session)
    run = Run.objects.create(session=live_session, exercise_version=version, code="x = 1\n",
                             queue="gpu")
    Run.objects.filter(pk=run.pk).update(created_at=timezone.now() - timedelta(seconds=30))
    services.runs_recover()
    assert Run.objects.get(pk=run.pk).status == Run.QUEUED  # still within the wait
    Run.objects.filter(pk=run.pk).update(created_at=timezone.now() - timedelta(seconds=61))
    services.runs_recover()
    run.refresh_from_db()
    assert (run.status, run.verdict, run.result["status"]) == (Run.DONE, "needs_gpu", "skip")
    assert "no GPU worker took the run within 60 s" in run.result["message"]


def test_the_session_form_says_no_gpu_worker_and_refuses_a_gpu_exercise(staff_client, synced):
    from catalog.models import Exercise

    exercise = Exercise.objects.get(slug="async-parameter-server")
    exercise.track = "gpu"
    exercise.save(update_fields=["track"])
    page = staff_client.get("/sessions/new/").content.decode()
    assert "(GPU: no GPU worker online, runs cannot be graded)" in page
    response = staff_client.post("/sessions/new/", {
        "exercise": exercise.pk, "candidate_name": "Lin", "candidate_email": "l@example.org",
        "time_zone": "UTC"})
    assert response.status_code == 200
    assert "no GPU worker is online" in response.content.decode()


def test_a_run_whose_worker_process_died_is_retried_at_once(live_session):
    """A pool process killed mid-run (SIGKILL, the OOM killer) stops beating, but waiting
    out OVERLAP_JOB_DEAD_AFTER_S (45 s) to notice was the candidate's wait. The process
    that replaces it sees, on its host, that the run's process is gone."""
    import os
    import subprocess
    import sys

    from runner.sandbox.backends.base import process_start

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()  # a process that ran here and is dead now
    host = services.this_process().split("|")[0]
    fresh = timezone.now()
    dead = Run.objects.create(session=live_session, exercise_version=live_session.exercise_version,
                              code="x = 1\n", status=Run.RUNNING, attempts=1, started_at=fresh,
                              heartbeat_at=fresh, worker=f"{host}|{gone.pid}:1")
    alive = Run.objects.create(session=live_session,
                               exercise_version=live_session.exercise_version, code="x = 2\n",
                               status=Run.RUNNING, attempts=1, started_at=fresh,
                               heartbeat_at=fresh,
                               worker=f"{host}|{os.getpid()}:{process_start(os.getpid())}")
    elsewhere = Run.objects.create(session=live_session,
                                   exercise_version=live_session.exercise_version,
                                   code="x = 3\n", status=Run.RUNNING, attempts=1,
                                   started_at=fresh, heartbeat_at=fresh,
                                   worker=f"another-host|{gone.pid}:1")
    counts = services.runs_recover_crashed()
    assert counts["retried"] == 1
    dead.refresh_from_db()
    alive.refresh_from_db()
    elsewhere.refresh_from_db()
    assert dead.status == Run.QUEUED  # sent again, its heartbeat still fresh
    assert alive.status == Run.RUNNING and elsewhere.status == Run.RUNNING
    assert _queue_length() >= 1
