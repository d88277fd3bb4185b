"""One full session on each exercise written through the authoring path (issue: three
more exercises from the question banks' topics): the candidate runs the reference and
gets Accepted from the real sandbox, the interviewer reveals a hint and scores the
rubric, the session ends and the scorecard holds the run."""

import json
from pathlib import Path

import pytest
from playwright.sync_api import expect

from catalog.models import Exercise
from interviews import services
from interviews.models import InterviewSession

EXERCISES = Path(__file__).resolve().parents[2] / "exercises"
SLUGS = [slug for slug in ("ring-allreduce-overlap", "nonblocking-checkpointing",
                           "input-pipeline-prefetch")
         if (EXERCISES / slug / "exercise.yaml").exists()]
TIMEOUT_MS = 90_000  # a cold sandbox imports torch


def _set_code(page, code: str) -> None:
    page.evaluate(
        "code => { const v = window.overlapEditor; "
        "v.dispatch({changes: {from: 0, to: v.state.doc.length, insert: code}}); v.focus(); }",
        code,
    )


@pytest.mark.parametrize("slug", SLUGS)
def test_a_whole_session_on_the_exercise(slug, browser, asgi_server, worker, content,
                                         interviewer_login, log_in):
    base = asgi_server
    exercise = Exercise.objects.get(slug=slug)
    session = services.session_create(interviewer=interviewer_login, exercise=exercise,
                                      candidate_name="Lin Chen",
                                      candidate_email="lin@example.org")
    services.session_start(session=session)
    interviewer = browser.new_context(viewport={"width": 1440, "height": 1000}).new_page()
    log_in(interviewer, base, "ada")
    interviewer.goto(f"{base}/sessions/{session.pk}/")
    candidate = browser.new_context(viewport={"width": 1440, "height": 1000}).new_page()
    candidate.goto(f"{base}/c/{session.token}/")
    expect(candidate.locator(".cm-editor")).to_be_visible()

    _set_code(candidate, exercise.current_version.files["solution.py"])
    expect(candidate.locator("#pad-status")).to_have_text("All changes saved", timeout=10_000)
    candidate.keyboard.press("Control+Enter")
    expect(candidate.locator("#run-result .verdict")).to_have_text("Accepted", timeout=TIMEOUT_MS)
    expect(candidate.locator("#run-result svg.timeline")).to_be_visible()
    expect(interviewer.locator("#runs .verdict")).to_have_text("Accepted", timeout=10_000)

    interviewer.once("dialog", lambda dialog: dialog.accept())
    interviewer.locator("#hints button", has_text="Reveal to candidate").first.click()
    expect(candidate.locator("#hints .hint")).to_have_count(1, timeout=10_000)
    first_criterion = interviewer.locator("#rubric form").first
    first_criterion.locator("input[type=radio]").last.check()
    expect(first_criterion.locator(".save-state")).to_have_text("Saved")

    interviewer.once("dialog", lambda dialog: dialog.accept())
    interviewer.click("text=End session")
    interviewer.wait_for_url("**/scorecard/")
    expect(interviewer.locator("h1")).to_contain_text("Scorecard: Lin Chen")
    card = json.loads(interviewer.request.get(
        f"{base}/sessions/{session.pk}/scorecard.json").text())
    assert card["runs"][0]["verdict"] == "accepted"
    assert card["hints"][0]["number"] == 1
    assert InterviewSession.objects.get(pk=session.pk).state == InterviewSession.ENDED
