"""The GPU exercise with no GPU worker online, in a real browser: the interviewer is told
where the exercise is picked, the candidate's Run answers within 10 s with the reason
(and stays usable), and a GPU run left queued when the GPU worker went away is answered
after the bounded wait instead of showing "Queued…" for ever."""

import time

import redis
from django.conf import settings as django_settings
from playwright.sync_api import expect

from catalog.models import Exercise
from interviews import services as interviews
from monitoring.heartbeat import beat, forget
from runs import services as runs
from runs.models import Run

GPU_SLUG = "gpu-gradient-accumulation"
ANSWER_MS = 10_000


def test_without_a_gpu_worker_the_gpu_exercise_says_so_and_run_answers_at_once(
        browser, asgi_server, content, interviewer_login, log_in, artifacts, settings):
    base = asgi_server
    exercise = Exercise.objects.get(slug=GPU_SLUG)

    # The interviewer, picking an exercise: the catalog and the session form say it.
    interviewer = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
    log_in(interviewer, base, "ada")
    card = interviewer.locator("article.exercise-card", has_text=exercise.title)
    expect(card.locator(".gpu-offline")).to_contain_text("No GPU worker is online")
    interviewer.goto(f"{base}/sessions/new/")
    expect(interviewer.locator(".session-form .gpu-offline")).to_contain_text(
        f"No GPU worker is online, so {exercise.title} cannot be picked now")

    # A session on it, made while a GPU worker was online; the worker has gone since.
    session = interviews.session_create(
        interviewer=interviewer_login, exercise=exercise, candidate_name="Lin",
        candidate_email="lin@example.org")
    interviews.session_start(session=session)
    candidate = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
    candidate.goto(f"{base}/c/{session.token}/")
    expect(candidate.locator(".cm-editor")).to_be_visible()

    started = time.monotonic()
    candidate.click("#run-button")
    expect(candidate.locator("#run-refused")).to_contain_text("no GPU worker is online",
                                                              timeout=ANSWER_MS)
    assert time.monotonic() - started < ANSWER_MS / 1000
    # Run again: the same clear answer, never "A run is already in progress".
    candidate.evaluate("document.querySelector('#run-refused').textContent = ''")
    candidate.click("#run-button")
    expect(candidate.locator("#run-refused")).to_contain_text("no GPU worker is online",
                                                              timeout=ANSWER_MS)
    expect(candidate.locator("#run-refused")).not_to_contain_text("already in progress")
    assert not Run.objects.filter(session=session).exists()
    candidate.screenshot(path=str(artifacts / "gpu-without-worker-candidate.png"))

    # A run queued while a GPU worker was online, which then went away without taking it:
    # after the bounded wait (beat's recovery) the candidate reads why, and can run again.
    settings.OVERLAP_GPU_QUEUE_WAIT_SECONDS = 2
    beat(hostname="gpu-browser-test", queues=["gpu"], pid=4545)
    try:
        candidate.click("#run-button")
        expect(candidate.locator("#run-result .run-status")).to_contain_text("Queued",
                                                                            timeout=ANSWER_MS)
    finally:
        forget(hostname="gpu-browser-test", pid=4545)
    started = time.monotonic()
    time.sleep(2.1)
    runs.runs_recover()  # what Celery beat sends every OVERLAP_RECOVER_EVERY_S
    expect(candidate.locator("#run-result .verdict")).to_have_text("Needs a GPU",
                                                                  timeout=ANSWER_MS)
    expect(candidate.locator("#run-result .run-message")).to_contain_text(
        "no GPU worker took the run within 2 s")
    assert time.monotonic() - started < ANSWER_MS / 1000
    candidate.click("#run-button")
    expect(candidate.locator("#run-refused")).to_contain_text("no GPU worker is online",
                                                              timeout=ANSWER_MS)
    candidate.screenshot(path=str(artifacts / "gpu-run-answered-after-wait.png"))
    redis.Redis.from_url(django_settings.CELERY_BROKER_URL).delete("gpu")
