"""The GPU exercise where no GPU worker is online: the interviewer is told where the
exercise is picked (catalog, session form), and a GPU run nobody can take never stays
"Queued": after a bounded wait, or when the session ends, it is answered with the reason
and the scorecard says so."""

from datetime import timedelta

import pytest
from django.utils import timezone

from catalog.models import Exercise
from interviews import services as interviews
from monitoring.heartbeat import beat, forget
from runs import services
from runs.models import Run

pytestmark = pytest.mark.django_db

OFFLINE = "No GPU worker is online"
GPU_SLUG = "gpu-gradient-accumulation"


@pytest.fixture
def gpu_worker():
    beat(hostname="gpu-test-host", queues=["gpu"], pid=4343)
    yield
    forget(hostname="gpu-test-host", pid=4343)


@pytest.fixture
def gpu_session(synced, interviewer, gpu_worker):
    """A live session on the GPU exercise, created while a GPU worker was online."""
    session = interviews.session_create(
        interviewer=interviewer, exercise=Exercise.objects.get(slug=GPU_SLUG),
        candidate_name="Lin", candidate_email="lin@example.org")
    interviews.session_start(session=session)
    session.refresh_from_db()
    return session


def _queued_gpu_run(session, seconds_ago: int = 0) -> Run:
    run = Run.objects.create(session=session, exercise_version=session.exercise_version,
                             code="x = 1\n", queue="gpu")
    Run.objects.filter(pk=run.pk).update(
        created_at=timezone.now() - timedelta(seconds=seconds_ago))
    return run


def test_the_catalog_says_when_no_gpu_worker_can_grade_the_gpu_exercise(staff_client, synced):
    listing = staff_client.get("/exercises/").content.decode()
    assert listing.count(OFFLINE) == 1  # on the GPU exercise's card only
    detail = staff_client.get(f"/exercises/{GPU_SLUG}/").content.decode()
    assert OFFLINE in detail
    simulated = staff_client.get("/exercises/async-parameter-server/").content.decode()
    assert OFFLINE not in simulated


def test_the_catalog_says_nothing_while_a_gpu_worker_is_online(staff_client, synced,
                                                               gpu_worker):
    assert OFFLINE not in staff_client.get("/exercises/").content.decode()
    assert OFFLINE not in staff_client.get(f"/exercises/{GPU_SLUG}/").content.decode()


def test_the_session_form_says_which_exercise_cannot_be_picked(staff_client, synced):
    page = staff_client.get("/sessions/new/").content.decode()
    title = Exercise.objects.get(slug=GPU_SLUG).title
    assert f"{OFFLINE}, so {title} cannot be picked now" in page


def test_ending_the_session_answers_its_gpu_run_nobody_took(staff_client, gpu_session):
    run = _queued_gpu_run(gpu_session)
    forget(hostname="gpu-test-host", pid=4343)  # the GPU worker went away
    response = staff_client.post(f"/sessions/{gpu_session.pk}/end/")
    assert response.status_code in (200, 302)
    run.refresh_from_db()
    assert (run.status, run.verdict) == (Run.DONE, "needs_gpu")
    assert "session ended before a GPU worker took this run" in run.result["message"]
    card = staff_client.get(f"/sessions/{gpu_session.pk}/scorecard/").content.decode()
    runs = card[card.index("<h2>Runs</h2>"):card.index('id="integrity-signals"')]
    assert "Needs a GPU" in runs and "Queued" not in runs
    assert "session ended before a GPU worker took this run" in runs


def test_ending_the_session_leaves_a_gpu_run_a_live_gpu_worker_will_take(staff_client,
                                                                         gpu_session):
    run = _queued_gpu_run(gpu_session)
    staff_client.post(f"/sessions/{gpu_session.pk}/end/")
    assert Run.objects.get(pk=run.pk).status == Run.QUEUED


def test_after_the_bounded_wait_the_candidate_can_run_again(client, gpu_session, settings):
    settings.OVERLAP_GPU_QUEUE_WAIT_SECONDS = 60
    run = _queued_gpu_run(gpu_session, seconds_ago=61)
    forget(hostname="gpu-test-host", pid=4343)
    services.runs_recover()
    run.refresh_from_db()
    assert (run.status, run.verdict) == (Run.DONE, "needs_gpu")
    assert "run it again" in run.result["message"]
    page = client.get(f"/c/{gpu_session.token}/runs/{run.pk}/").content.decode()
    assert "Needs a GPU" in page and "no GPU worker took the run within 60 s" in page
    # The next Run is not refused as "already in progress": with a GPU worker back it is
    # queued, without one it is refused at once with the reason.
    refused = client.post(f"/c/{gpu_session.token}/run/", {"code": "x = 2\n"},
                          HTTP_HX_REQUEST="true").content.decode()
    assert "no GPU worker is online" in refused and "already in progress" not in refused
    beat(hostname="gpu-test-host", queues=["gpu"], pid=4343)
    client.post(f"/c/{gpu_session.token}/run/", {"code": "x = 2\n"})
    assert gpu_session.runs.filter(status=Run.QUEUED).count() == 1
