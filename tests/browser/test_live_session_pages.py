"""The live session's pages in a real browser: the lobby, chat, a hint arriving, the
scorecard's playback and printing, and the layouts at 1440 px and 390 px."""

from playwright.sync_api import expect

from catalog.models import Exercise
from interviews import pad, services
from interviews.models import InterviewSession

SLUG = "async-parameter-server"


def _session(interviewer, *, start=True) -> InterviewSession:
    session = services.session_create(interviewer=interviewer,
                                      exercise=Exercise.objects.get(slug=SLUG),
                                      candidate_name="Lin Chen",
                                      candidate_email="lin@example.org")
    if start:
        services.session_start(session=session)
    session.refresh_from_db()
    return session


def _staff_page(browser, base, log_in, width):
    page = browser.new_context(
        bypass_csp=True, viewport={"width": width, "height": 900}).new_page()
    log_in(page, base, "ada")
    return page


def test_lobby_keeps_its_card_and_opens_the_pad_when_the_interviewer_starts(
        browser, asgi_server, content, interviewer_login, log_in):
    session = _session(interviewer_login, start=False)
    candidate = browser.new_context(
        bypass_csp=True, viewport={"width": 390, "height": 844}).new_page()
    candidate.goto(f"{asgi_server}/c/{session.token}/")
    expect(candidate.locator(".lobby h1")).to_have_text("Welcome, Lin Chen")
    candidate.wait_for_timeout(2500)  # two polls later the card is still there
    expect(candidate.locator(".lobby h1")).to_be_visible()
    expect(candidate.locator("#lobby-interviewer")).to_have_text("Ada Byron")  # not "ada"

    staff = _staff_page(browser, asgi_server, log_in, 1440)
    staff.goto(f"{asgi_server}/sessions/{session.pk}/")
    staff.click("text=Start session")
    expect(candidate.locator(".cm-editor")).to_be_visible(timeout=10_000)


def test_chat_a_hint_notice_and_the_layouts_at_1440_and_390(
        browser, asgi_server, content, interviewer_login, log_in, artifacts):
    session = _session(interviewer_login)
    for width in (1440, 390):
        staff = _staff_page(browser, asgi_server, log_in, width)
        staff.goto(f"{asgi_server}/sessions/{session.pk}/")
        candidate = browser.new_context(
        bypass_csp=True, viewport={"width": width, "height": 900}).new_page()
        candidate.goto(f"{asgi_server}/c/{session.token}/")
        for page in (staff, candidate):
            expect(page.locator(".cm-editor")).to_be_visible()
            page.wait_for_function("window.overlapPad && window.overlapPad.synced()")

        staff.fill("#chat-input", f"Hello from the interviewer at {width}px")
        staff.press("#chat-input", "Enter")
        expect(candidate.locator("#chat-log")).to_contain_text(
            f"Hello from the interviewer at {width}px")
        candidate.fill("#chat-input", "Hi! Starting now.")
        candidate.press("#chat-input", "Enter")
        expect(staff.locator("#chat-log")).to_contain_text("Hi! Starting now.")

        if width == 1440:
            staff.once("dialog", lambda dialog: dialog.accept())
            staff.locator("#hints button", has_text="Reveal to candidate").first.click()
            expect(candidate.locator("#hint-notice")).to_contain_text("Hint 1")
            expect(candidate.locator("#hint-1")).to_be_in_viewport()

        # Keyboard focus is visible on Run.
        candidate.locator("#run-button").focus()
        outline = candidate.locator("#run-button").evaluate(
            "el => getComputedStyle(el).outlineStyle + ' ' + getComputedStyle(el).boxShadow")
        assert "solid" in outline or "rgb" in outline
        # No sideways scrolling at this width.
        for page in (staff, candidate):
            assert page.evaluate("document.documentElement.scrollWidth") <= width + 1
        for page, name in ((candidate, "workspace"), (staff, "console")):
            page.evaluate("window.scrollTo(0, 0)")
            page.screenshot(path=str(artifacts / f"{name}-{width}.png"), full_page=True)
            page.screenshot(path=str(artifacts / f"{name}-{width}-first-screen.png"))
        staff.context.close()
        candidate.context.close()


def test_scorecard_plays_back_and_prints_every_line_of_code(
        browser, asgi_server, content, interviewer_login, log_in, artifacts):
    session = _session(interviewer_login)
    long_code = "".join(f"value_{i} = {i}  # line {i + 1}\n" for i in range(120))
    pad.pad_replace(session_id=session.pk, text=long_code,
                    author=pad.author_for_candidate(session))
    session.refresh_from_db()
    pad.pad_push(session_id=session.pk, version=session.pad_version,
                 updates=[{"clientID": "staff", "changes": [[0, "# reviewed\n"], len(long_code)]}],
                 author=pad.author_for_interviewer(interviewer_login))
    services.hint_reveal(session=session, index=0, by=interviewer_login)
    services.session_end(session=session)

    staff = _staff_page(browser, asgi_server, log_in, 1440)
    staff.goto(f"{asgi_server}/sessions/{session.pk}/scorecard/")
    player = staff.locator("#playback")
    expect(player).to_have_attribute("data-ready", "true")
    expect(player.locator(".playback-who")).to_contain_text("Ada Byron (interviewer)")
    player.locator(".playback-scrub").fill("1")
    expect(player.locator(".playback-who")).to_contain_text("Lin Chen (candidate)")
    expect(player.locator(".playback-code")).not_to_contain_text("# reviewed")
    expect(player.locator(".playback-markers")).to_contain_text("Hint 1 revealed")
    player.locator(".playback-play").click()
    expect(player.locator(".playback-code")).to_contain_text("# reviewed", timeout=10_000)

    staff.emulate_media(media="print")
    final = staff.locator("section", has=staff.locator("h2", has_text="Final code")) \
        .locator("pre")
    text = final.inner_text()
    assert all(f"# line {i + 1}" in text for i in range(120))
    box = final.evaluate("el => [el.scrollHeight, el.clientHeight, getComputedStyle(el).maxHeight]")
    assert box[2] == "none" and box[0] <= box[1] + 1  # nothing hidden behind a scroll box
    staff.pdf(path=str(artifacts / "scorecard-print.pdf"))
