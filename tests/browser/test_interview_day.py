"""What an interviewer and a candidate notice on the day, in real browsers: a refused Run
keeps the results pane, an opened "Output" stays open, overtime is readable, the error line
is brought into view, following the candidate never pulls the interviewer away from their
own typing, a remote name never enters the text, the timeline is legible and the printed
chat is complete."""

import time
from datetime import timedelta

from django.utils import timezone
from playwright.sync_api import expect

from catalog.models import Exercise
from interviews import pad, services
from interviews.models import ChatMessage, InterviewSession
from runs import services as run_services
from runs.models import Run

SLUG = "async-parameter-server"
TRACE = {
    "baseline": {"makespan": 4.0, "lanes": ["worker-0", "worker-1", "server"], "spans": [
        {"lane": "worker-0", "op": "compute", "start": 0, "end": 2},
        {"lane": "worker-1", "op": "compute", "start": 2, "end": 4},
        {"lane": "server", "op": "apply", "start": 1, "end": 1.5, "blocking": True},
    ]},
    "candidate": {"makespan": 2.0, "lanes": ["worker-0", "worker-1", "server"], "spans": [
        {"lane": "worker-0", "op": "compute", "start": 0, "end": 2},
        {"lane": "worker-1", "op": "compute", "start": 0, "end": 2},
        {"lane": "server", "op": "apply", "start": 1, "end": 1.2},
    ]},
}

# WCAG relative luminance and contrast of two computed CSS colours ("rgb(r, g, b)").
CONTRAST_JS = """el => {
  const rgb = (css) => css.match(/[\\d.]+/g).slice(0, 4).map(Number);
  const lum = ([r, g, b]) => [r, g, b].map((v) => { v /= 255;
      return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; })
    .reduce((sum, v, i) => sum + v * [0.2126, 0.7152, 0.0722][i], 0);
  let back = el, bg = null;
  while (back) {  // the first ancestor that paints a background
    const c = rgb(getComputedStyle(back).backgroundColor);
    if (c.length < 4 || c[3] > 0) { bg = c; break; }
    back = back.parentElement;
  }
  bg = bg || [255, 255, 255];
  const a = lum(rgb(getComputedStyle(el).color)), b = lum(bg);
  return (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
}"""


def _live_session(interviewer, **changes) -> InterviewSession:
    session = services.session_create(interviewer=interviewer,
                                      exercise=Exercise.objects.get(slug=SLUG),
                                      candidate_name="Lin Chen",
                                      candidate_email="lin@example.org")
    services.session_start(session=session)
    if changes:
        InterviewSession.objects.filter(pk=session.pk).update(**changes)
    session.refresh_from_db()
    return session


def _wait_synced(page) -> None:
    """Until every change typed on the page is on the server (polled from here: the page's
    Content-Security-Policy keeps Playwright's in-page polling out)."""
    deadline = time.monotonic() + 30
    while not page.evaluate("!!(window.overlapPad && window.overlapPad.synced())"):
        assert time.monotonic() < deadline, "the pad did not sync"
        page.wait_for_timeout(100)


def _page(browser, width=1440, height=1000):
    return browser.new_context(viewport={"width": width, "height": height}).new_page()


def _candidate(browser, base, session, width=1440):
    page = _page(browser, width)
    page.goto(f"{base}/c/{session.token}/")
    expect(page.locator(".cm-editor")).to_be_visible()
    _wait_synced(page)
    return page


def _console(browser, base, session, log_in, width=1440, height=1000):
    page = _page(browser, width, height)
    log_in(page, base, "ada")
    page.goto(f"{base}/sessions/{session.pk}/")
    return page


def _finish(run: Run, verdict: str, **result) -> None:
    """What the worker would record when the grading ends, and its announcement."""
    Run.objects.filter(pk=run.pk).update(
        status=Run.DONE, verdict=verdict, finished_at=timezone.now(),
        result={"status": "pass" if verdict == "accepted" else "fail", **result})
    run.refresh_from_db()
    run_services.announce(run, run.status)


def _accepted_run_with_timeline(session) -> None:
    run = run_services.run_create(session=session, code=session.pad_text,
                                  requested_by="candidate")
    _finish(run, "accepted", trace=TRACE,
            metrics={"speedup": 2.0, "target_speedup": 1.5, "baseline_time": 4.0,
                     "candidate_time": 2.0})


def _set_pad(session, text: str) -> None:
    pad.pad_replace(session_id=session.pk, text=text, author=pad.author_for_candidate(session))


def test_a_refused_run_keeps_the_results_pane_and_the_verdict_still_arrives(
        browser, asgi_server, content, interviewer_login, settings):
    settings.OVERLAP_RUNS_PER_MINUTE = 1
    session = _live_session(interviewer_login)
    candidate = _candidate(browser, asgi_server, session)

    # A double-click: the second click is refused beside the button, not in the pane.
    candidate.dblclick("#run-button")
    expect(candidate.locator("#run-refused")).to_contain_text("already in progress")
    expect(candidate.locator("#run-result .run-active")).to_be_visible()
    run = session.runs.get()
    _finish(run, "accepted", checks=[{"name": "Same parameters", "status": "pass"}])
    expect(candidate.locator("#run-result .verdict")).to_have_text("Accepted", timeout=5_000)
    expect(candidate.locator("#run-result .check-pass")).to_contain_text("Same parameters")

    # The per-minute limit: refused beside the button, the verdict stays in the pane.
    candidate.click("#run-button")
    expect(candidate.locator("#run-refused")).to_contain_text("Too many runs")
    candidate.wait_for_timeout(1000)
    expect(candidate.locator("#run-result .verdict")).to_have_text("Accepted")
    assert session.runs.count() == 1


def test_an_opened_output_stays_open_while_the_console_refreshes_its_runs(
        browser, asgi_server, content, interviewer_login, log_in):
    session = _live_session(interviewer_login)
    run = run_services.run_create(session=session, code=session.pad_text,
                                  requested_by="candidate")
    _finish(run, "too_slow", stdout="epoch 1: loss 0.52\nepoch 2: loss 0.31\n",
            checks=[{"name": "Same parameters", "status": "pass"}])
    console = _console(browser, asgi_server, session, log_in)
    output = console.locator("#runs details", has=console.locator("summary", has_text="Output"))
    expect(output).to_be_visible()
    console.wait_for_timeout(1200)  # the panel has refreshed at least once
    output.locator("summary").click()
    expect(output.locator("pre")).to_contain_text("epoch 2: loss 0.31")
    console.wait_for_timeout(5000)  # five refreshes later it is still open
    expect(output).to_have_attribute("open", "")
    expect(output.locator("pre")).to_be_visible()

    # A new run still replaces the panel.
    second = Run.objects.create(session=session, exercise_version=session.exercise_version,
                                code=session.pad_text, requested_by="interviewer")
    _finish(second, "accepted")
    expect(console.locator("#runs .verdict").first).to_have_text("Accepted", timeout=5_000)


def test_overtime_is_readable_on_the_current_phase_and_a_switch_opens_its_guide(
        browser, asgi_server, content, interviewer_login, log_in, artifacts):
    long_ago = timezone.now() - timedelta(hours=3)
    session = _live_session(interviewer_login, started_at=long_ago, phase_started_at=long_ago)
    console = _console(browser, asgi_server, session, log_in)
    phase_timer = console.locator("#phases .current .phase-timer")
    expect(phase_timer).to_contain_text("over")
    expect(phase_timer).to_have_class("timer phase-timer overtime")
    assert phase_timer.evaluate(CONTRAST_JS) >= 4.5
    allocation = console.locator("#allocation-timer")
    expect(allocation).to_contain_text("over")
    assert allocation.evaluate(CONTRAST_JS) >= 4.5
    console.locator("#phases").screenshot(path=str(artifacts / "console-phase-overtime.png"))

    guide = console.locator(".guide-pane")
    expect(guide.locator("details[data-guide-phase=introduction]")).to_have_attribute("open", "")
    expect(guide.locator("details[data-guide-phase=coding]")).not_to_have_attribute("open", "")
    console.locator("#phases button", has_text="Coding").click()
    expect(console.locator("#phases [aria-current=step]")).to_contain_text("Coding")
    expect(guide.locator("details[data-guide-phase=coding]")).to_have_attribute("open", "")
    expect(guide.locator("details[data-guide-phase=introduction]")).not_to_have_attribute(
        "open", "")
    console.locator("#phases button", has_text="Walkthrough").click()
    expect(guide.locator("details[data-guide-phase=walkthrough]")).to_have_attribute("open", "")
    expect(guide.locator("details[data-guide-phase=walkthrough] h4").first).to_be_in_viewport()


def test_the_error_line_is_brought_into_view_live_and_after_a_reload(
        browser, asgi_server, content, interviewer_login):
    session = _live_session(interviewer_login)
    _set_pad(session, "".join(f"value_{i} = {i}\n" for i in range(199)) + "oops(\n")
    candidate = _candidate(browser, asgi_server, session)
    error_line = candidate.locator(".cm-line.cm-error-line")
    expect(candidate.locator(".cm-line", has_text="value_0 =")).to_be_in_viewport()

    candidate.click("#run-button")
    expect(candidate.locator("#run-result .run-active")).to_be_visible()
    _finish(session.runs.get(), "syntax_error", message="'(' was never closed",
            error={"line": 200})
    expect(candidate.locator(".run-error-line")).to_contain_text("line 200")
    expect(error_line).to_contain_text("oops(")
    expect(error_line).to_be_in_viewport()

    # Opened again later, the page shows the same result and the same line.
    candidate.reload()
    expect(candidate.locator(".run-error-line")).to_contain_text("line 200")
    expect(error_line).to_contain_text("oops(", timeout=10_000)
    expect(error_line).to_be_in_viewport()


def test_following_the_candidate_waits_while_the_interviewer_types(
        browser, asgi_server, content, interviewer_login, log_in):
    session = _live_session(interviewer_login)
    _set_pad(session, "".join(f"line_{i} = {i}\n" for i in range(200)))
    candidate = _candidate(browser, asgi_server, session)
    console = _console(browser, asgi_server, session, log_in, height=1400)  # the whole pad
    expect(console.locator(".console-editor .cm-editor")).to_be_visible()
    _wait_synced(console)
    expect(console.locator("#follow-toggle")).to_be_checked()

    # The candidate works at the bottom; the console follows them there.
    candidate.locator(".cm-content").click()
    candidate.keyboard.press("Control+End")
    candidate.keyboard.type("# candidate at the end")
    candidate_label = console.locator(".remote-cursor-name[data-name='Lin Chen']")
    expect(candidate_label).to_be_in_viewport()

    # The interviewer goes to the top and types there while the candidate keeps typing.
    console.locator(".console-editor .cm-content").focus()
    console.keyboard.press("Control+Home")
    top_line = console.locator(".console-editor .cm-line", has_text="line_0 =")
    for i in range(8):
        console.keyboard.type(f"# note {i} ")
        candidate.keyboard.type(f" more {i}")
        console.wait_for_timeout(250)
        expect(top_line).to_be_in_viewport()
    expect(console.locator("#follow-toggle")).to_be_checked()

    # Still for a few seconds, the interviewer is taken back to the candidate.
    console.wait_for_timeout(4500)
    candidate.keyboard.type(" and again")
    expect(candidate_label).to_be_in_viewport(timeout=5_000)


def test_text_committed_through_the_input_path_never_takes_a_remote_name_along(
        browser, asgi_server, content, interviewer_login, log_in):
    """IME and dictation commit text through the browser's input path (insertText), not as
    key presses; a remote cursor's name next to the caret must never become text."""
    session = _live_session(interviewer_login, interviewer_readonly=False)
    _set_pad(session, "def step(x):\n    return x\n\n\nprint(step(1))\n")
    candidate = _candidate(browser, asgi_server, session)
    console = _console(browser, asgi_server, session, log_in)
    expect(console.locator(".console-editor .cm-editor")).to_be_visible()
    _wait_synced(console)
    console.locator("#follow-toggle").uncheck()

    for attempt in range(4):
        # The interviewer's cursor sits where the candidate's caret is (line 3), and on
        # every other try the interviewer keeps typing there meanwhile.
        console.locator(".console-editor .cm-content").focus()
        console.evaluate("""typing => { const v = window.overlapEditor;
            v.dispatch({selection: {anchor: v.state.doc.line(3).from}});
            clearInterval(window.typingNow);
            if (typing) window.typingNow = setInterval(() => {
              const at = v.state.selection.main.head;
              v.dispatch({changes: {from: at, insert: "z"}, selection: {anchor: at + 1},
                          userEvent: "input.type"}); }, 40); }""", attempt % 2 == 1)
        expect(candidate.locator(".remote-cursor-name[data-name='Ada Byron']")).to_be_visible()
        candidate.locator(".cm-content").focus()
        candidate.evaluate("() => { const v = window.overlapEditor;"
                           " v.dispatch({selection: {anchor: v.state.doc.line(3).from}}); }")
        text = f"total_{attempt} = 0\nfor i in range(3):\n    total_{attempt} += i\n"
        if attempt < 2:
            candidate.keyboard.insert_text(text)  # what an IME's commit does
        else:  # an input event from the page's own text path (dictation tools use it)
            candidate.evaluate("t => document.execCommand('insertText', false, t)", text)
        candidate.wait_for_timeout(300)
        console.evaluate("clearInterval(window.typingNow)")
        _wait_synced(candidate)
    text = candidate.evaluate("window.overlapEditor.state.doc.toString()")
    assert "Ada Byron" not in text and "Lin Chen" not in text
    assert all(f"total_{n} = 0\nfor i in range(3):\n" in text for n in range(4))
    session.refresh_from_db()
    assert "Ada Byron" not in session.pad_text
    # The names are still shown, by the style sheet.
    label = candidate.locator(".remote-cursor-name[data-name='Ada Byron']")
    assert "Ada Byron" in label.evaluate(
        "el => getComputedStyle(el, '::after').content")


def test_the_timeline_is_legible_on_a_1440_screen_and_its_legend_shows_blocking(
        browser, asgi_server, content, interviewer_login, artifacts):
    session = _live_session(interviewer_login)
    _accepted_run_with_timeline(session)
    candidate = _candidate(browser, asgi_server, session)
    svg = candidate.locator("#run-result svg.timeline")
    expect(svg).to_be_visible()
    rendered = "el => parseFloat(getComputedStyle(el).fontSize) * el.getScreenCTM().a"
    sizes = [text.evaluate(rendered) for text in svg.locator("text.tl-lane, text.tl-legend").all()]
    assert sizes and min(sizes) >= 11, sizes
    expect(svg.locator("text.tl-legend", has_text="blocking")).to_have_count(1)
    assert svg.locator("rect.tl-legend-blocking").evaluate(
        "el => getComputedStyle(el).stroke") == "rgb(179, 38, 30)"

    candidate.screenshot(path=str(artifacts / "workspace-timeline-1440.png"))

    # Enlarged to the window, and back.
    candidate.get_by_role("button", name="Enlarge").click()
    figure = candidate.locator("#run-result .timeline-figure")
    expect(figure).to_have_class("timeline-figure enlarged")
    assert svg.evaluate("el => el.getBoundingClientRect().width") >= 1300
    candidate.screenshot(path=str(artifacts / "workspace-timeline-enlarged-1440.png"))
    candidate.keyboard.press("Escape")
    expect(figure).to_have_class("timeline-figure")


def test_a_run_with_its_timeline_never_makes_a_narrow_screen_scroll_sideways(
        browser, asgi_server, content, interviewer_login, log_in, artifacts):
    """The console at 390 px was 929 px wide once a run's timeline was on it: the
    one-column grid took the timeline's drawn width. The timeline scrolls in its own box."""
    session = _live_session(interviewer_login)
    _accepted_run_with_timeline(session)
    for width in (390, 800):
        console = _console(browser, asgi_server, session, log_in, width=width, height=844)
        candidate = _candidate(browser, asgi_server, session, width=width)
        for page, name in ((console, "console"), (candidate, "workspace")):
            figure = page.locator(".timeline-figure").first
            expect(figure).to_be_attached()
            assert page.evaluate("document.documentElement.scrollWidth") <= width + 1, name
            box = page.locator(".cm-editor").first.bounding_box()
            assert box["x"] + box["width"] <= width + 1, (name, box)
            # The drawing keeps its legible size inside its own scrolling box.
            assert figure.evaluate("el => el.scrollWidth > el.clientWidth"), name
            page.screenshot(path=str(artifacts / f"{name}-timeline-{width}.png"))
        console.context.close()
        candidate.context.close()


def test_the_latest_verdict_is_at_the_top_of_the_console_and_follows_each_run(
        browser, asgi_server, content, interviewer_login, log_in):
    """The run panel is far down the console (y > 1000 at 1440x900): the latest run's
    verdict is also in the header, on the first screen, and follows every run."""
    session = _live_session(interviewer_login)
    console = _console(browser, asgi_server, session, log_in, height=900)
    latest = console.locator("#latest-run")
    expect(latest).to_have_text("No runs yet")
    first = run_services.run_create(session=session, code=session.pad_text,
                                    requested_by="candidate")
    expect(latest).to_contain_text("Latest run: Queued", timeout=5_000)
    _finish(first, "too_slow", metrics={"speedup": 1.02, "target_speedup": 1.5})
    expect(latest).to_contain_text("1.02\u00d7", timeout=5_000)
    expect(latest).to_have_class("latest-run failed")
    box = latest.bounding_box()
    assert box and box["y"] + box["height"] <= 900, box  # no scrolling needed
    second = run_services.run_create(session=session, code=session.pad_text,
                                     requested_by="interviewer")
    _finish(second, "accepted", metrics={"speedup": 2.0, "target_speedup": 1.5})
    expect(latest).to_contain_text("2.00\u00d7", timeout=5_000)
    expect(latest).to_contain_text("interviewer")
    expect(latest).to_have_class("latest-run passed")
    assert console.locator("#latest-run").count() == 1  # replaced, never duplicated
    latest.click()  # takes the interviewer to the run panel
    expect(console.locator("#runs")).to_be_in_viewport()


def test_deep_in_the_rubric_the_interviewer_still_reaches_the_run_and_the_chat(
        browser, asgi_server, content, interviewer_login, log_in):
    """On a laptop's window the live pane (code, Run, the latest run, chat) is taller than
    the window: with the rubric scrolled to the top of the window, the pane keeps to the
    window and scrolls on its own, so the verdict and the chat come into view while the
    rubric stays where it was."""
    session = _live_session(interviewer_login)
    _accepted_run_with_timeline(session)
    console = _console(browser, asgi_server, session, log_in, width=1440, height=900)
    # The first screen: the candidate link, invitation included, takes one row and an
    # empty integrity log one line, so the shared code starts in the window's upper half
    # (575 px down before).
    editor = console.locator("#editor").bounding_box()
    assert editor and editor["y"] < 500, editor
    console.evaluate("document.querySelector('#rubric').scrollIntoView({block: 'start'})")
    console.wait_for_timeout(200)
    at = console.evaluate("window.scrollY")
    criterion = console.locator("#rubric fieldset").first
    expect(criterion).to_be_in_viewport()
    expect(console.locator(".cm-editor")).to_be_in_viewport()  # the code is in view
    expect(console.locator("#chat-input")).not_to_be_in_viewport()
    pane = console.locator(".live-pane")
    box = pane.bounding_box()
    assert box and box["height"] <= 900, box  # the pane keeps to the window
    pane.evaluate("pane => pane.scrollBy(0, pane.scrollHeight)")  # its scroll bar, dragged down
    expect(console.locator("#chat-input")).to_be_in_viewport()
    expect(console.locator("#runs .verdict").first).to_be_in_viewport()
    expect(criterion).to_be_in_viewport()
    assert console.evaluate("window.scrollY") == at  # the page itself did not move


def test_the_printed_scorecard_holds_the_whole_chat(
        browser, asgi_server, content, interviewer_login, log_in, artifacts):
    session = _live_session(interviewer_login)
    for i in range(11):
        ChatMessage.objects.create(session=session, role=("candidate", "interviewer")[i % 2],
                                   author=("Lin Chen", "Ada Byron")[i % 2],
                                   text=f"Message number {i + 1} about the parameter server")
    services.session_end(session=session)
    staff = _page(browser)
    log_in(staff, asgi_server, "ada")
    staff.goto(f"{asgi_server}/sessions/{session.pk}/scorecard/")
    expect(staff.locator("hgroup p")).to_contain_text("Interviewer: Ada Byron")
    staff.emulate_media(media="print")
    log = staff.locator("#chat-transcript .chat-log")
    box = log.evaluate("el => [el.scrollHeight, el.clientHeight, getComputedStyle(el).maxHeight]")
    assert box[2] == "none" and box[0] <= box[1] + 1, box
    messages = log.locator("li")
    expect(messages).to_have_count(11)
    for i in range(11):
        expect(messages.nth(i)).to_contain_text(f"Message number {i + 1} ")
    staff.pdf(path=str(artifacts / "scorecard-chat-print.pdf"))
    assert "Message number 11" in staff.locator("#chat-transcript").inner_text()


def test_small_things_the_logo_and_a_deadlock_message(
        browser, asgi_server, content, interviewer_login):
    session = _live_session(interviewer_login)
    run = run_services.run_create(session=session, code=session.pad_text,
                                  requested_by="candidate")
    _finish(run, "timeout", message="Deadlock at t=1.000 s (simulated): every task is "
            "waiting. Waiting: `worker-0` on `queue.get()`.")
    candidate = _candidate(browser, asgi_server, session)
    # The candidate has no account: the logo does not lead to the staff login.
    expect(candidate.locator(".site-header a[href]")).to_have_count(0)
    message = candidate.locator("#run-result .run-message")
    expect(message.locator("code")).to_have_text(["worker-0", "queue.get()"])
    expect(message).not_to_contain_text("`")


def test_a_run_the_server_cannot_answer_says_the_work_is_kept(
        browser, asgi_server, content, interviewer_login):
    """The web server restarting behind the proxy (502) or not answering at all (an
    upgrade, a cut connection): the page says so and that the work is kept, instead of
    staying silent, and recovers on the next answered request. (A 503 while the database
    is away carries its own page, swapped into the results: tests/faults.)"""
    session = _live_session(interviewer_login)
    candidate = _candidate(browser, asgi_server, session)
    banner = candidate.locator("#server-unavailable")
    # Every request of the page fails, as when the server is down (the page's own polls
    # too: one answered poll would take the banner away, as it should).
    pages = f"**/c/{session.token}/**"
    candidate.route(pages, lambda route: route.fulfill(
        status=502, content_type="text/html", body="<h1>Bad gateway</h1>"))
    candidate.click("#run-button")
    expect(banner).to_contain_text("temporarily unavailable", timeout=5_000)
    expect(banner).to_contain_text("Your work is kept")
    candidate.unroute(pages)
    candidate.evaluate("document.getElementById('server-unavailable')?.remove()")
    candidate.route(pages, lambda route: route.abort("connectionrefused"))
    candidate.click("#run-button")
    expect(banner).to_be_visible()
    candidate.wait_for_timeout(1500)  # polls fail too: the banner stays
    expect(banner).to_be_visible()
    candidate.unroute(pages)
    candidate.click("#run-button")
    expect(banner).to_have_count(0, timeout=5_000)
    expect(candidate.locator("#run-result .run-active")).to_be_visible()
