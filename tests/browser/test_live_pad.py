"""The shared pad in two real browsers through the real ASGI server and Redis channel layer:
the interviewer and the candidate type into one document at the same time."""

import time

from playwright.sync_api import expect

from catalog.models import Exercise
from interviews import services
from interviews.models import InterviewSession

SLUG = "async-parameter-server"
ROUNDS = 20  # x 10 characters each side = 200 characters each


def _live_session(interviewer) -> InterviewSession:
    session = services.session_create(interviewer=interviewer,
                                      exercise=Exercise.objects.get(slug=SLUG),
                                      candidate_name="Lin Chen",
                                      candidate_email="lin@example.org")
    services.session_start(session=session)
    session.refresh_from_db()
    return session


def _doc(page) -> str:
    return page.evaluate("window.overlapEditor.state.doc.toString()")


def _wait_synced(page) -> None:
    page.wait_for_function("window.overlapPad && window.overlapPad.synced()", timeout=30_000)


def _converge(session, *pages) -> str:
    """Wait until every page shows the server's text; return it."""
    for page in pages:
        _wait_synced(page)
    deadline = time.monotonic() + 30
    while True:
        session.refresh_from_db()
        if all(_doc(page) == session.pad_text for page in pages):
            return session.pad_text
        assert time.monotonic() < deadline, "the pages did not converge on the server's text"
        pages[0].wait_for_timeout(200)


def _open_pads(browser, base, session, log_in, width=1440):
    interviewer = browser.new_context(
        bypass_csp=True, viewport={"width": width, "height": 1000}).new_page()
    log_in(interviewer, base, "ada")
    interviewer.goto(f"{base}/sessions/{session.pk}/")
    candidate = browser.new_context(
        bypass_csp=True, viewport={"width": width, "height": 1000}).new_page()
    candidate.goto(f"{base}/c/{session.token}/")
    for page in (interviewer, candidate):
        expect(page.locator(".cm-editor")).to_be_visible()
        _wait_synced(page)
    return interviewer, candidate


def test_interviewer_and_candidate_type_at_once_and_end_with_the_same_text(
        browser, asgi_server, content, interviewer_login, log_in, artifacts):
    session = _live_session(interviewer_login)
    start = session.pad_text
    interviewer, candidate = _open_pads(browser, asgi_server, session, log_in)

    errors = []
    for page in (interviewer, candidate):
        page.on("pageerror", lambda error: errors.append(error))
    # The candidate writes at the end of the file, the interviewer at the end of line 1.
    candidate.locator(".cm-content").click()
    candidate.keyboard.press("Control+End")
    interviewer.locator(".cm-content").click()
    interviewer.keyboard.press("Control+Home")
    interviewer.keyboard.press("End")
    typed = {"candidate": "", "interviewer": ""}
    for i in range(ROUNDS):
        chunk = f"C{i:03d}-abcd "
        candidate.keyboard.type(chunk)  # no waiting in between: the pushes cross
        typed["candidate"] += chunk
        chunk = f"I{i:03d}-wxyz "
        interviewer.keyboard.type(chunk)
        typed["interviewer"] += chunk
    _converge(session, candidate, interviewer)

    session.refresh_from_db()
    on_candidate, on_interviewer = _doc(candidate), _doc(interviewer)
    assert on_candidate == on_interviewer == session.pad_text
    lines = session.pad_text.split("\n")
    assert lines[0] == start.split("\n")[0] + typed["interviewer"]
    assert lines[-1] == typed["candidate"]
    assert len(session.pad_text) == len(start) + 400  # nothing lost, nothing doubled
    assert errors == []
    assert session.pad_updates.filter(role="candidate").exists()
    assert session.pad_updates.filter(role="interviewer", author="Ada Byron").exists()

    # Each side sees the other's named cursor. The interviewer follows the candidate: once
    # their own typing has paused, the view catches up with the candidate's cursor at the
    # end of the file, although the candidate has stopped moving.
    expect(interviewer.locator(".remote-cursor-name[data-name='Lin Chen']")).to_be_visible(
        timeout=10_000)
    # The candidate, at the end of the file, is told where the interviewer is and gets there
    # in one click; the button goes once the interviewer's cursor is in sight.
    jump = candidate.locator(".peer-jump[data-name='Ada Byron']")
    expect(jump).to_have_attribute("data-where", "above")
    expect(jump).to_contain_text("line 1")
    jump.click()
    expect(candidate.locator(".remote-cursor-name[data-name='Ada Byron']")).to_be_visible()
    expect(jump).to_have_count(0)
    interviewer.screenshot(path=str(artifacts / "pad-interviewer-1440.png"))
    candidate.screenshot(path=str(artifacts / "pad-candidate-1440.png"))


def test_a_reload_and_an_offline_spell_lose_nothing_and_run_refuses_offline(
        browser, asgi_server, content, interviewer_login, log_in):
    session = _live_session(interviewer_login)
    interviewer, candidate = _open_pads(browser, asgi_server, session, log_in)
    candidate.locator(".cm-content").click()
    candidate.keyboard.press("Control+End")

    candidate.context.set_offline(True)
    candidate.keyboard.type("# typed while offline")
    expect(candidate.locator("#pad-status")).to_contain_text("Offline", timeout=10_000)
    candidate.locator("#run-button").click()
    expect(candidate.locator("#run-refused")).to_contain_text("offline")
    assert session.runs.count() == 0

    # Back online: the change reaches the server and the interviewer.
    candidate.context.set_offline(False)
    _wait_synced(candidate)
    expect(interviewer.locator(".cm-content")).to_contain_text("# typed while offline")

    # Typed, then reloaded at once: still there after the reload.
    candidate.locator(".cm-content").click()
    candidate.keyboard.press("Control+End")
    candidate.keyboard.type(" and before a reload")
    candidate.reload()
    candidate.wait_for_function(
        "() => window.overlapEditor && window.overlapEditor.state.doc.toString()"
        ".includes('and before a reload')", timeout=10_000)
    _wait_synced(candidate)
    session.refresh_from_db()
    assert session.pad_text.rstrip().endswith("# typed while offline and before a reload")
    interviewer.wait_for_function("t => window.overlapEditor.state.doc.toString() === t",
                                  arg=session.pad_text, timeout=10_000)


def test_following_the_candidate_never_pulls_a_scrolled_view_back(
        browser, asgi_server, content, interviewer_login, log_in):
    session = _live_session(interviewer_login)
    interviewer, candidate = _open_pads(browser, asgi_server, session, log_in)
    scroller = interviewer.locator(".console-editor .cm-scroller")
    candidate.locator(".cm-content").click()
    candidate.keyboard.press("Control+End")
    candidate.keyboard.type("# at the end")
    expect(interviewer.locator(".remote-cursor-name[data-name='Lin Chen']")).to_be_visible()
    # The interviewer scrolls up by hand: following stops and the view stays put.
    scroller.hover()
    interviewer.mouse.wheel(0, -5000)
    interviewer.wait_for_timeout(300)
    expect(interviewer.locator("#follow-toggle")).not_to_be_checked()
    top = scroller.evaluate("el => el.scrollTop")
    candidate.keyboard.type(" and more")
    interviewer.wait_for_timeout(1500)
    assert scroller.evaluate("el => el.scrollTop") == top
    # Out of sight is not out of mind: a button says where the candidate is, and takes the
    # interviewer there when asked (following stays off).
    jump = interviewer.locator(".peer-jump[data-name='Lin Chen']")
    expect(jump).to_have_attribute("data-where", "below")
    lines = session.pad_text.count("\n") + 1
    expect(jump).to_contain_text(f"line {lines}")
    jump.click()
    expect(interviewer.locator(".remote-cursor-name[data-name='Lin Chen']")).to_be_in_viewport()
    expect(jump).to_have_count(0)
    expect(interviewer.locator("#follow-toggle")).not_to_be_checked()
    # The name fades once the candidate is still (it covers the line above), and comes
    # back as soon as they move again.
    opacity = ("() => { const n = document.querySelector(\".remote-cursor-name"
               "[data-name='Lin Chen']\"); return n && getComputedStyle(n).opacity; }")
    interviewer.wait_for_function(f"({opacity})() === '0'", timeout=8_000)
    candidate.keyboard.type("!")
    interviewer.wait_for_function(f"({opacity})() === '1'", timeout=3_000)


def test_two_tabs_merge_indentation_is_four_spaces_and_the_error_line_is_marked(
        browser, asgi_server, content, interviewer_login):
    session = _live_session(interviewer_login)
    context = browser.new_context(
        bypass_csp=True, viewport={"width": 1440, "height": 1000})
    first, second = context.new_page(), context.new_page()  # two tabs, one browser
    for page in (first, second):
        page.goto(f"{asgi_server}/c/{session.token}/")
        expect(page.locator(".cm-editor")).to_be_visible()
        _wait_synced(page)
    first.locator(".cm-content").click()
    first.keyboard.press("Control+Home")
    first.keyboard.type("def helper():\nreturn 1\n")
    second.locator(".cm-content").click()
    second.keyboard.press("Control+End")
    second.keyboard.type("# from the second tab")
    _converge(session, first, second)
    assert session.pad_text.startswith("def helper():\n    return 1\n")  # 4 spaces
    assert session.pad_text.endswith("# from the second tab")
    # A run result pointing at line 2 marks that line in the editor.
    first.evaluate("""document.getElementById('run-result').insertAdjacentHTML('beforeend',
        '<div class="run run-fail" data-error-line="2"><strong class="verdict">Runtime error'
        + '</strong></div>')""")
    expect(first.locator(".cm-line.cm-error-line")).to_have_count(1)
    expect(first.locator(".cm-line.cm-error-line")).to_contain_text("return 1")
    # An error far down the file is scrolled into view ("marked in the editor").
    first.evaluate("""() => { const v = window.overlapEditor;
        v.dispatch({changes: {from: v.state.doc.length,
                              insert: Array.from({length: 150}, (_, i) => '\\nx_' + i).join('')}});
        v.scrollDOM.scrollTop = 0; }""")
    line = first.evaluate("window.overlapEditor.state.doc.lines") - 5
    # A new run's result replaces the pane, as htmx swaps it.
    first.evaluate(f"""document.getElementById('run-result').innerHTML =
        '<div class="run run-fail" id="run-77" data-error-line="{line}"><strong '
        + 'class="verdict">Runtime error</strong></div>'""")
    expect(first.locator(".cm-line.cm-error-line")).to_contain_text("x_")
    expect(first.locator(".cm-line.cm-error-line")).to_be_in_viewport()


def test_pasted_text_the_server_cannot_store_is_shown_as_u_fffd_and_typing_goes_on(
        browser, asgi_server, content, interviewer_login):
    """A NUL or half of a surrogate pair (from a binary paste) would be refused by the
    server, and everything typed after it would wait behind the refused change. The
    editor turns each into U+FFFD before sending: the text reaches the server, and so does
    what is typed next."""
    session = _live_session(interviewer_login)
    page = browser.new_context(bypass_csp=True, viewport={"width": 1440, "height": 1000}) \
        .new_page()
    page.goto(f"{asgi_server}/c/{session.token}/")
    expect(page.locator(".cm-editor")).to_be_visible()
    _wait_synced(page)
    page.evaluate("""window.overlapEditor.dispatch({
        changes: { from: 0, insert: "pasted = '\\u0000\\ud800\\ud83d\\ude00'\\n" },
        userEvent: "input.paste" })""")
    page.locator(".cm-content").click()
    page.keyboard.press("Control+End")
    page.keyboard.type("# typed after the paste")
    text = _converge(session, page)
    assert text.startswith("pasted = '\ufffd\ufffd\U0001f600'\n")  # the emoji is kept whole
    assert text.endswith("# typed after the paste")


def test_a_runs_verdict_is_pushed_to_the_candidates_page_not_waited_for(
        browser, asgi_server, worker, content, interviewer_login, log_in, settings):
    """The pad's socket brings the news that a run finished, and the page fetches the
    verdict at once: with the fallback poll set to ten minutes, it still shows."""
    settings.OVERLAP_RUN_POLL_MS = 600_000
    session = _live_session(interviewer_login)
    interviewer, candidate = _open_pads(browser, asgi_server, session, log_in)
    candidate.locator("#run-button").click()
    expect(candidate.locator("#run-result .run-active")).to_be_visible(timeout=10_000)
    too_slow = "Correct, but not fast enough"  # the starter, as it stands in the pad
    expect(candidate.locator("#run-result .verdict")).to_have_text(too_slow, timeout=90_000)
    expect(interviewer.locator("#runs .verdict")).to_have_text(too_slow, timeout=10_000)


def test_the_console_says_whether_the_candidate_is_in_the_pad(
        browser, asgi_server, content, interviewer_login, log_in):
    session = _live_session(interviewer_login)
    interviewer = browser.new_context(bypass_csp=True).new_page()
    log_in(interviewer, asgi_server, "ada")
    interviewer.goto(f"{asgi_server}/sessions/{session.pk}/")
    _wait_synced(interviewer)
    people = interviewer.locator("#pad-people")
    expect(people).to_have_text("Lin Chen is not in the pad")
    expect(people).to_have_attribute("data-candidate", "away")

    # The candidate opens the link and touches nothing: the console knows at once.
    candidate_context = browser.new_context(bypass_csp=True)
    candidate = candidate_context.new_page()
    candidate.goto(f"{asgi_server}/c/{session.token}/")
    _wait_synced(candidate)
    expect(people).to_have_text("Lin Chen is in the pad", timeout=3_000)
    expect(people).to_have_attribute("data-candidate", "here")

    # An interviewer who reloads the console (or opens it late) sees it too, although
    # the candidate has not moved since: the candidate's page answers the newcomer.
    interviewer.reload()
    _wait_synced(interviewer)
    expect(people).to_have_text("Lin Chen is in the pad", timeout=3_000)

    # The candidate closes the tab.
    candidate_context.close()
    expect(people).to_have_text("Lin Chen is not in the pad", timeout=5_000)


def test_a_message_while_the_chat_is_out_of_sight_is_announced_and_one_click_away(
        browser, asgi_server, content, interviewer_login, log_in):
    session = _live_session(interviewer_login)
    interviewer, candidate = _open_pads(browser, asgi_server, session, log_in)
    chat = interviewer.locator("section.chat")
    expect(chat).not_to_be_in_viewport()  # below the editor and the runs at 1440x1000
    notice = interviewer.locator(".chat-unread")

    candidate.fill("#chat-input", "Can I use asyncio.gather here?")
    candidate.press("#chat-input", "Enter")
    expect(notice).to_have_text("New message · Lin Chen: Can I use asyncio.gather here?")
    candidate.fill("#chat-input", "Or TaskGroup?")
    candidate.press("#chat-input", "Enter")
    expect(notice).to_have_text("2 new messages · Lin Chen: Or TaskGroup?")
    expect(notice).to_be_in_viewport()

    notice.click()
    expect(chat).to_be_in_viewport()
    expect(interviewer.locator("#chat-input")).to_be_focused()
    expect(notice).to_have_count(0)
    expect(interviewer.locator("#chat-log")).to_contain_text("Or TaskGroup?")

    # With the chat in sight, a message needs no notice; nor does one's own.
    candidate.fill("#chat-input", "Thanks!")
    candidate.press("#chat-input", "Enter")
    expect(interviewer.locator("#chat-log")).to_contain_text("Thanks!")
    interviewer.fill("#chat-input", "Either works.")
    interviewer.press("#chat-input", "Enter")
    expect(interviewer.locator("#chat-log")).to_contain_text("Either works.")
    interviewer.wait_for_timeout(500)
    expect(notice).to_have_count(0)
