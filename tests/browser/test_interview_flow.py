"""A whole interview in two real browsers: the interviewer's console and the candidate's
workspace, with a real run graded in the sandbox."""

import json

from playwright.sync_api import expect

from catalog.models import Exercise
from interviews.models import InterviewSession

SLUG = "async-parameter-server"
TIMEOUT_MS = 90_000  # a cold sandbox imports torch; the grading itself takes well under 1 s


def _set_code(page, code: str) -> None:
    """Replace the editor's text the way a paste would (one transaction, autosaved)."""
    page.evaluate(
        "code => { const v = window.overlapEditor; "
        "v.dispatch({changes: {from: 0, to: v.state.doc.length, insert: code}}); v.focus(); }",
        code,
    )


def test_interviewer_and_candidate_run_a_session_end_to_end(
        browser, asgi_server, worker, content, interviewer_login, artifacts, log_in):
    base = asgi_server
    solution = Exercise.objects.get(slug=SLUG).current_version.files["solution.py"]

    interviewer = browser.new_context(viewport={"width": 1440, "height": 1000}).new_page()
    log_in(interviewer, base, "ada")
    interviewer.goto(f"{base}/sessions/new/")
    interviewer.select_option("select[name=exercise]", label="Asynchronous parameter server")
    interviewer.fill("input[name=candidate_name]", "Lin Chen")
    interviewer.fill("input[name=candidate_email]", "lin@example.org")
    interviewer.click("form.session-form button[type=submit]")
    interviewer.click("text=Start session")
    expect(interviewer.locator(".badge.state-live")).to_be_visible()
    candidate_link = interviewer.input_value("#candidate-link")

    candidate = browser.new_context(viewport={"width": 1440, "height": 1000}).new_page()
    candidate.goto(candidate_link)
    expect(candidate.locator(".cm-editor")).to_be_visible()
    expect(candidate.locator(".cm-content")).to_contain_text("class Trainer")

    # The candidate writes the asynchronous version and runs it with Ctrl+Enter.
    _set_code(candidate, solution + "\n# converted by Lin\n")
    expect(candidate.locator("#pad-status")).to_have_text("All changes saved", timeout=10_000)
    candidate.keyboard.press("Control+Enter")
    expect(candidate.locator("#run-result .verdict")).to_have_text("Accepted", timeout=TIMEOUT_MS)
    expect(candidate.locator("#run-result .speedup")).to_contain_text("\u00d7 speedup")
    expect(candidate.locator("#run-result svg.timeline")).to_be_visible()
    expect(candidate.locator("#run-result .check-pass").first).to_be_visible()

    # A double-click on Run: the second click is refused next to the button, and the
    # results pane keeps the first click's run until its verdict arrives.
    candidate.dblclick("#run-button")
    expect(candidate.locator("#run-refused")).to_contain_text("already in progress")
    expect(candidate.locator("#run-result .verdict")).to_have_text("Accepted", timeout=TIMEOUT_MS)
    expect(candidate.locator("#run-result .speedup")).to_be_visible()

    # The interviewer sees the new code live, and the run with its verdict.
    expect(interviewer.locator(".console-editor .cm-content")).to_contain_text(
        "# converted by Lin", timeout=5_000)
    expect(interviewer.locator("#runs .verdict")).to_have_text("Accepted", timeout=10_000)

    # A hint revealed by the interviewer appears for the candidate.
    interviewer.once("dialog", lambda dialog: dialog.accept())  # "Reveal hint 1 …?"
    interviewer.locator("#hints button", has_text="Reveal to candidate").first.click()
    expect(interviewer.locator("#hints .hint.revealed")).to_have_count(1)
    expect(candidate.locator("#hints .hint")).to_have_count(1, timeout=10_000)
    expect(candidate.locator("#hints")).to_contain_text("Hint 1")

    # Rubric scoring is saved as it is clicked.
    first_criterion = interviewer.locator("#rubric form").first
    first_criterion.locator("input[type=radio]").last.check()
    expect(first_criterion.locator(".save-state")).to_have_text("Saved")

    candidate.screenshot(path=str(artifacts / "candidate-workspace.png"), full_page=True)
    interviewer.screenshot(path=str(artifacts / "interviewer-console.png"), full_page=True)

    interviewer.once("dialog", lambda dialog: dialog.accept())
    interviewer.click("text=End session")
    interviewer.wait_for_url("**/scorecard/")
    expect(interviewer.locator("h1")).to_contain_text("Scorecard: Lin Chen")
    expect(interviewer.locator("main")).to_contain_text("# converted by Lin")
    interviewer.screenshot(path=str(artifacts / "scorecard.png"), full_page=True)

    # The candidate's workspace is now read-only.
    expect(candidate.locator(".ended h1")).to_have_text("This interview has ended",
                                                         timeout=10_000)

    session = InterviewSession.objects.get()
    card = json.loads(interviewer.request.get(
        f"{base}/sessions/{session.pk}/scorecard.json").text())
    assert card["runs"][0]["verdict"] == "accepted"
    assert card["hints"][0]["number"] == 1
    assert card["rubric"][0]["score"] == max(
        level["score"] for level in session.exercise_version.guide["rubric"][0]["levels"])
