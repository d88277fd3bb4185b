"""Key pages work in a real browser under the Content-Security-Policy, with no violation:
the catalog, an exercise's guide, the session console and scorecard, the candidate's
workspace, and the authoring editor."""

from django.contrib.auth.models import Group, User
from playwright.sync_api import expect

from authoring import services as authoring_services
from catalog.models import Exercise
from interviews import services as interview_services

SLUG = "async-parameter-server"
PASSWORD = "correct horse battery"

# Collected in the page itself: every `securitypolicyviolation` event.
LISTEN = """
window.__csp = [];
document.addEventListener('securitypolicyviolation', e => window.__csp.push(
  e.violatedDirective + ' blocked ' + (e.blockedURI || 'inline') + ' at ' + e.sourceFile +
  ':' + e.lineNumber));
"""


def _watched_page(browser):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.add_init_script(LISTEN)
    page = context.new_page()
    page.console_messages = []
    page.on("console", lambda message: page.console_messages.append(
        f"{message.type}: {message.text}"))
    return page


def _violations(page) -> list[str]:
    seen = page.evaluate("window.__csp || []")
    console = [m for m in page.console_messages
               if "Content Security Policy" in m or "Refused to" in m]
    return seen + console


def test_key_pages_load_with_no_csp_violation(browser, asgi_server, content, log_in):
    base = asgi_server  # the real ASGI server: the candidate's pad needs its WebSocket
    user = User.objects.create_user("ada", password=PASSWORD)
    user.groups.add(Group.objects.get_or_create(name="interviewers")[0],
                    Group.objects.get_or_create(name="authors")[0])
    exercise = Exercise.objects.get(slug=SLUG)
    session = interview_services.session_create(
        interviewer=user, exercise=exercise, candidate_name="Lin",
        candidate_email="lin@example.org")
    interview_services.session_start(session=session)
    authoring_services.draft_for_exercise(exercise=exercise, user=user)

    staff = _watched_page(browser)
    log_in(staff, base, "ada")
    header = staff.goto(f"{base}/exercises/").headers["content-security-policy"]
    assert "script-src 'self'" in header and "unsafe-inline" not in header
    pages = {
        "catalog": (f"{base}/exercises/", "table, .exercise-list, main h1"),
        "exercise guide": (f"{base}/exercises/{SLUG}/", "main h1"),
        "session console": (f"{base}/sessions/{session.pk}/", "#candidate-link"),
        "scorecard": (f"{base}/sessions/{session.pk}/scorecard/", "main h1"),
        "authoring editor": (f"{base}/authoring/exercises/{SLUG}/files/solution.py",
                             ".cm-editor"),
        "authoring details": (f"{base}/authoring/exercises/{SLUG}/details/", "main h1"),
        "question banks": (f"{base}/questions/", "main h1"),
    }
    for name, (url, selector) in pages.items():
        staff.goto(url)
        expect(staff.locator(selector).first).to_be_visible()
        staff.wait_for_timeout(300)  # let polling (htmx every 1 s) and bundles run
        assert _violations(staff) == [], name

    # htmx still works under the policy: the live search swaps in results.
    staff.goto(f"{base}/questions/")
    staff.fill("input[type=search]", "stale")
    expect(staff.locator("#results")).not_to_be_empty()
    assert _violations(staff) == []

    # The replaced inline handler still selects the candidate link on click.
    staff.goto(f"{base}/sessions/{session.pk}/")
    staff.click("#candidate-link")
    selected = staff.evaluate("window.getSelection().toString() || "
                              "document.activeElement.value.substring("
                              "document.activeElement.selectionStart,"
                              "document.activeElement.selectionEnd)")
    assert f"/c/{session.token}/" in selected

    candidate = _watched_page(browser)
    candidate.goto(f"{base}/c/{session.token}/")
    expect(candidate.locator(".cm-editor")).to_be_visible()
    expect(candidate.locator(".cm-content")).to_contain_text("class Trainer")
    candidate.wait_for_timeout(2500)  # a couple of polls of hints and state
    assert _violations(candidate) == []


def test_the_admin_and_status_page_load_with_no_csp_violation(browser, live_server,
                                                              transactional_db, log_in):
    base = live_server.url
    User.objects.create_superuser("ada", password=PASSWORD)
    page = _watched_page(browser)
    log_in(page, base, "ada")
    for url, selector in ((f"{base}/admin/", "#content"),
                          (f"{base}/admin/auth/user/", "#result_list"),
                          (f"{base}/admin/auth/user/add/", "form"),
                          (f"{base}/admin/status/", "main h1")):
        page.goto(url)
        expect(page.locator(selector).first).to_be_visible()
        page.wait_for_timeout(300)
        assert _violations(page) == [], url
