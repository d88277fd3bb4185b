"""An author creates a small exercise in the browser, validates it in the sandbox through
the Celery worker, publishes it, and a candidate runs it in a live interview."""

import pytest
from django.contrib.auth.models import Group, User
from playwright.sync_api import expect

from catalog.models import Exercise

pytestmark = pytest.mark.browser

PASSWORD = "correct horse battery"
VALIDATION_TIMEOUT_MS = 300_000  # five files, each a cold sandbox importing torch
RUN_TIMEOUT_MS = 90_000

DETAILS = {
    "summary": "Compute every batch's gradient on two workers at once.",
    "tags": "asyncio, data-parallelism",
    "overview": "Two workers, four batches: run them concurrently.",
    "introduction.script": "Let's make two workers compute at the same time.",
    "coding.steps[0]": "Give the candidate a minute to read the starter.",
    "coding.watch_for[0]": "One task per worker.",
    "hints[0].expected_answer": "The two workers.",
    "walkthrough.basic_structure[0]": "One task per worker, gathered.",
    "walkthrough.key_points[0]": "`asyncio.gather` keeps the batch order.",
    "walkthrough.expected_performance": "About 2x.",
    "rubric[0].key": "concurrency",
    "rubric[0].title": "Concurrency",
    "rubric[0].description": "Runs both workers at once.",
    "rubric[0].levels[0].description": "Sequential.",
    "rubric[0].levels[1].description": "Some overlap.",
    "rubric[0].levels[2].description": "Both workers busy.",
    "rubric[0].levels[3].description": "And can say why.",
    "followups.questions[0].question": "What if there were more workers?",
    "followups.questions[0].good_answer": "It scales until the batches run out.",
    "applications.items[0].title": "Data parallelism",
    "applications.items[0].description": "Every multi-GPU training job.",
}

REVERSED_EXAMPLE = '''\
"""Returns the gradients in the reverse order.

expect: wrong
failing: gradients
"""


class Trainer:
    def __init__(self, cluster):
        self.cluster = cluster

    def train(self):
        workers = self.cluster.workers
        gradients = []
        for i, batch in enumerate(self.cluster.batches):
            worker = workers[i % len(workers)]
            gradients.append(worker.compute_gradient(self.cluster.model, batch))
        return gradients[::-1]
'''


def _author(transactional_db) -> User:
    user = User.objects.create_user("grace", password=PASSWORD)
    user.groups.add(Group.objects.get_or_create(name="authors")[0])
    return user


def _set_code(page, editor_id: str, code: str) -> None:
    """Replace an editor's text the way a paste would."""
    page.evaluate(
        "([id, code]) => { const v = window.overlapEditors[id]; "
        "v.dispatch({changes: {from: 0, to: v.state.doc.length, insert: code}}); v.focus(); }",
        [editor_id, code],
    )


def test_an_author_creates_validates_and_publishes_an_exercise_a_candidate_then_runs(
        browser, asgi_server, worker, content, interviewer_login, artifacts, log_in,
        transactional_db):
    _author(transactional_db)
    base = asgi_server  # the ASGI server: the candidate's pad needs its WebSocket
    author = browser.new_context(viewport={"width": 1440, "height": 1000}).new_page()
    log_in(author, base, "grace")

    # A new exercise: blank details, a small working code side.
    author.goto(f"{base}/authoring/new/")
    author.fill("input[name=slug]", "tiny-workers")
    author.fill("input[name=title]", "Tiny workers")
    author.click("main form button[type=submit]")
    author.wait_for_url(f"{base}/authoring/exercises/tiny-workers/details/")

    # The prompt's preview is rendered as it is typed, through the sanitizer.
    author.fill('[name="prompt"]', "# Tiny workers\n\nUse **both** workers. <script>x</script>")
    expect(author.locator("#f-prompt .md-preview strong")).to_have_text("both")
    expect(author.locator("#f-prompt .md-preview script")).to_have_count(0)

    # Everything but one hint's prompt: saved as typed, the empty hint named clearly.
    for name, value in DETAILS.items():
        author.fill(f'[name="{name}"]', value)
    author.click("#save-details")
    expect(author.locator(".problems-box")).to_contain_text(
        "guide.yaml: hints[0].prompt: must not be empty")
    expect(author.locator('[name="hints[0].prompt"]')).to_have_attribute("aria-invalid", "true")
    expect(author.locator('[name="overview"]')).to_have_value(DETAILS["overview"])
    author.fill('[name="hints[0].prompt"]', "What could run at the same time?")
    author.click("#save-details")
    expect(author.locator(".problems-box")).to_have_count(0)

    # The reference solution, in the candidates' code editor, saved with Ctrl+S.
    author.goto(f"{base}/authoring/exercises/tiny-workers/files/solution.py")
    expect(author.locator(".code-editor .cm-editor")).to_be_visible()
    solution = author.evaluate("() => window.overlapEditors['code-text'].state.doc.toString()")
    _set_code(author, "code-text", solution + "# reviewed by grace\n")
    author.keyboard.press("Control+s")
    expect(author.locator("main")).to_contain_text("Saved solution.py.")

    # A new example declaring its verdict.
    author.goto(f"{base}/authoring/exercises/tiny-workers/")
    example = author.locator("form", has=author.locator("input[name=kind][value=example]"))
    example.locator("input[name=name]").fill("reversed_order")
    example.locator("input[name=failing]").fill("gradients")
    example.locator("button[type=submit]").click()
    author.wait_for_url("**/files/examples/reversed_order.py")
    _set_code(author, "code-text", REVERSED_EXAMPLE)
    author.click("#save-file")
    expect(author.locator("main")).to_contain_text("Saved examples/reversed_order.py.")

    # Validate: the worker grades each file in the sandbox; the page follows along.
    author.goto(f"{base}/authoring/exercises/tiny-workers/")
    expect(author.locator("#publish-button")).to_be_disabled()
    author.click("#validate-button")
    expect(author.locator("#validation .validation-header strong")).to_have_text(
        "Passed", timeout=VALIDATION_TIMEOUT_MS)
    parts = author.locator("#validation tr.part")
    expect(parts).to_have_count(5)
    expect(author.locator("#validation tr.part-ok")).to_have_count(5)
    expect(parts.filter(has_text="solution.py")).to_contain_text("accepted")
    expect(parts.filter(has_text="solution.py")).to_contain_text("2.00\N{MULTIPLICATION SIGN}")
    expect(parts.filter(has_text="reversed_order.py")).to_contain_text("wrong [gradients]")
    author.screenshot(path=str(artifacts / "authoring-validated.png"), full_page=True)

    author.click("#publish-button")
    expect(author.locator("main")).to_contain_text("Published v1.")
    version = Exercise.objects.get(slug="tiny-workers").current_version
    assert version.files["solution.py"].endswith("# reviewed by grace\n")
    assert "examples/reversed_order.py" in version.files

    # An interviewer runs it in a live session; the candidate's run is graded.
    interviewer = browser.new_context(viewport={"width": 1440, "height": 1000}).new_page()
    log_in(interviewer, base, "ada")
    interviewer.goto(f"{base}/sessions/new/")
    interviewer.select_option("select[name=exercise]", label="Tiny workers")
    interviewer.fill("input[name=candidate_name]", "Lin Chen")
    interviewer.fill("input[name=candidate_email]", "lin@example.org")
    interviewer.click("form.session-form button[type=submit]")
    interviewer.click("text=Start session")
    candidate = browser.new_context(viewport={"width": 1440, "height": 1000}).new_page()
    candidate.goto(interviewer.input_value("#candidate-link"))
    expect(candidate.locator(".cm-content")).to_contain_text("class Trainer")
    expect(candidate.locator("main")).to_contain_text("Use both workers.")
    expect(candidate.locator("main")).not_to_contain_text("What could run at the same time?")
    candidate.evaluate(
        "code => { const v = window.overlapEditor; "
        "v.dispatch({changes: {from: 0, to: v.state.doc.length, insert: code}}); v.focus(); }",
        version.files["solution.py"],
    )
    expect(candidate.locator("#pad-status")).to_have_text("All changes saved", timeout=10_000)
    candidate.keyboard.press("Control+Enter")
    expect(candidate.locator("#run-result .verdict")).to_have_text("Accepted",
                                                                   timeout=RUN_TIMEOUT_MS)
    expect(candidate.locator("#run-result .speedup")).to_contain_text(
        "2.00\N{MULTIPLICATION SIGN} speedup")
    candidate.screenshot(path=str(artifacts / "authoring-candidate-run.png"), full_page=True)
