"""The pad's WebSocket through Channels and the real Redis channel layer."""

import asyncio

import pytest
from asgiref.sync import async_to_sync

from interviews import pad
from tests.platform.ws_client import WebsocketCommunicator

pytestmark = pytest.mark.django_db(transaction=True)
ORIGIN = (b"origin", b"http://testserver")


@pytest.fixture(autouse=True)
def _groups(transactional_db):
    """Transactional tests flush the groups the migrations created; put them back."""
    from django.contrib.auth.models import Group

    for name in ("interviewers", "authors"):
        Group.objects.get_or_create(name=name)


def _app():
    """Imported inside the test: the origin check reads ALLOWED_HOSTS when it is built,
    and the test environment adds `testserver` to it only then."""
    from overlap.asgi import application

    return application


def _candidate(session, since=None):
    query = f"?v={since}" if since is not None else ""
    return WebsocketCommunicator(_app(), f"/ws/c/{session.token}/{query}", headers=[ORIGIN])


def _interviewer(session, client):
    cookie = f"sessionid={client.cookies['sessionid'].value}".encode()
    return WebsocketCommunicator(_app(), f"/ws/sessions/{session.pk}/",
                                 headers=[ORIGIN, (b"cookie", cookie)])


async def _next(ws, kind, timeout=10):  # generous: a loaded CI machine
    while True:
        message = await ws.receive_json_from(timeout=timeout)
        if message["type"] == kind:
            return message


def test_typing_reaches_the_other_side_and_a_stale_push_is_refused(live_session, staff_client):
    async def scenario():
        cand, staff = _candidate(live_session), _interviewer(live_session, staff_client)
        c1 = await cand.connect()
        c2 = await staff.connect()
        assert c1[0] and c2[0], (c1, c2)
        hello = await _next(cand, "hello")
        await _next(staff, "hello")
        assert hello["doc"] == live_session.pad_text and hello["version"] == 0
        assert hello["you"] == {"role": "candidate", "name": "Lin", "peer": hello["you"]["peer"]}
        n = len(hello["doc"])
        await cand.send_json_to({"type": "push", "version": 0, "updates": [
            {"clientID": "c1", "changes": [[0, "# hi"], n]}]})
        mine = await _next(cand, "updates")  # accepted: the confirmation
        assert mine["pushed"] is True
        assert mine["version"] == 0 and mine["updates"][0]["clientID"] == "c1"
        theirs = await _next(staff, "updates")
        assert theirs["updates"][0]["changes"] == [[0, "# hi"], n]
        assert theirs["updates"][0]["author"] == "Lin"
        # The interviewer had not seen version 1 yet when typing: refused, then rebased.
        await staff.send_json_to({"type": "push", "version": 0, "updates": [
            {"clientID": "s1", "changes": [n, [0, "#"]]}]})
        assert (await _next(staff, "pushed"))["ok"] is False
        await staff.send_json_to({"type": "pull", "version": 0})
        pulled = await _next(staff, "updates")
        assert len(pulled["updates"]) == 1
        # Cursors: the candidate's selection reaches the interviewer with the name.
        await cand.send_json_to({"type": "presence", "anchor": 1, "head": 3})
        presence = await _next(staff, "presence")
        assert (presence["name"], presence["anchor"], presence["head"]) == ("Lin", 1, 3)
        await cand.disconnect()
        await staff.disconnect()

    async_to_sync(scenario)()
    live_session.refresh_from_db()
    assert live_session.pad_text.startswith("# hi") and live_session.pad_version == 1


def test_a_newcomer_is_announced_so_that_the_others_say_where_they_are(
        live_session, staff_client):
    async def scenario():
        cand = _candidate(live_session)
        await cand.connect()
        await _next(cand, "hello")
        staff = _interviewer(live_session, staff_client)
        await staff.connect()
        await _next(staff, "hello")
        # The candidate's page hears that someone opened the pad (and nothing else of
        # them), answers with its cursor, and the newcomer sees the candidate is here.
        assert await _next(cand, "joined") == {"type": "joined"}
        await cand.send_json_to({"type": "presence", "anchor": 0, "head": 0})
        presence = await _next(staff, "presence")
        assert (presence["role"], presence["name"]) == ("candidate", "Lin")
        # A second candidate tab is announced to the interviewer too; nobody hears of
        # their own arrival.
        second = _candidate(live_session)
        await second.connect()
        await _next(second, "hello")
        assert await _next(staff, "joined") == {"type": "joined"}
        assert await second.receive_nothing(timeout=0.5)
        # Gone: the others hear its cursor is no more.
        await cand.disconnect()
        gone = await _next(staff, "presence")
        assert gone["name"] == "Lin" and gone["anchor"] is None
        await second.disconnect()
        await staff.disconnect()

    async_to_sync(scenario)()


def test_a_reconnecting_tab_gets_the_text_at_its_version_and_what_it_missed(live_session):
    from interviews import pad

    start = live_session.pad_text
    pad.pad_push(session_id=live_session.pk, version=0,
                 updates=[{"clientID": "x", "changes": [[0, "A"], len(start)]}],
                 author=pad.author_for_candidate(live_session))

    async def scenario():
        ws = _candidate(live_session, since=0)
        await ws.connect()
        hello = await _next(ws, "hello")
        await ws.disconnect()
        return hello

    hello = async_to_sync(scenario)()
    assert hello["version"] == 0 and hello["doc"] == start and hello["head"] == 1
    assert [u["changes"] for u in hello["updates"]] == [[[0, "A"], len(start)]]


def test_chat_is_stored_and_pushed_to_both_sides(live_session, staff_client):
    async def scenario():
        cand, staff = _candidate(live_session), _interviewer(live_session, staff_client)
        await cand.connect()
        await staff.connect()
        await _next(cand, "hello")
        await _next(staff, "hello")
        await staff.send_json_to({"type": "chat", "text": "Take your time."})
        got = await _next(cand, "chat")
        echo = await _next(staff, "chat")  # the sender sees its message once it is stored
        assert echo["message"]["id"] == got["message"]["id"]
        await cand.send_json_to({"type": "chat", "text": "Thanks!"})
        back = await _next(staff, "chat")
        await cand.disconnect()
        await staff.disconnect()
        return got, back

    got, back = async_to_sync(scenario)()
    assert got["message"]["text"] == "Take your time." and got["message"]["author"] == "Interviewer"
    assert back["message"]["text"] == "Thanks!" and back["message"]["role"] == "candidate"
    assert list(live_session.chat_messages.values_list("text", flat=True)) == [
        "Take your time.", "Thanks!"]


def test_what_a_browser_sends_that_cannot_be_stored_is_refused_and_the_line_stays_up(
        live_session):
    """A NUL in a chat message or a change, a lone surrogate (JSON carries both as
    escapes), a message nested past the JSON decoder's bound: each gets a refusal or is
    dropped, and the same connection goes on working."""

    async def scenario():
        cand = _candidate(live_session)
        await cand.connect()
        hello = await _next(cand, "hello")
        await cand.send_to("[" * 5000 + "]" * 5000)
        await cand.send_json_to({"type": "chat", "text": "nul \x00 here"})
        chat = await _next(cand, "refused")
        await cand.send_json_to({"type": "push", "version": hello["version"], "updates": [
            {"clientID": "tab", "changes": [[0, "x = '\ud800'"], len(hello["doc"])]}]})
        push = await _next(cand, "pushed")
        await cand.send_json_to({"type": "chat", "text": "still here"})
        echo = await _next(cand, "chat")
        await cand.disconnect()
        return chat, push, echo

    chat, push, echo = async_to_sync(scenario)()
    assert "cannot be stored" in chat["message"]
    assert push["ok"] is False and "cannot be stored" in push["refused"]
    assert echo["message"]["text"] == "still here"
    assert list(live_session.chat_messages.values_list("text", flat=True)) == ["still here"]
    live_session.refresh_from_db()
    assert live_session.pad_version == 0


def test_strangers_and_old_links_cannot_connect(live_session, client):
    from interviews import services

    async def can_connect(ws):
        connected, _ = await ws.connect()
        if connected:
            await ws.disconnect()
        return connected

    old = _candidate(live_session)
    services.token_renew(session=live_session)
    anonymous = WebsocketCommunicator(_app(), f"/ws/sessions/{live_session.pk}/",
                                      headers=[ORIGIN])
    foreign = WebsocketCommunicator(_app(), f"/ws/c/{live_session.token}/",
                                    headers=[(b"origin", b"http://evil.example")])
    assert not async_to_sync(can_connect)(old)
    assert not async_to_sync(can_connect)(anonymous)
    assert not async_to_sync(can_connect)(foreign)


@pytest.mark.parametrize("origin", [
    b"http://testserver:9999",  # another service on the same host name
    b"https://testserver",  # another scheme: the page was not served over TLS
    b"http://testserver.evil.example",
    b"null",
])
def test_a_socket_from_another_port_or_scheme_is_refused(live_session, staff_client, origin):
    async def can_connect(ws):
        connected, _ = await ws.connect()
        if connected:
            await ws.disconnect()
        return connected

    cookie = f"sessionid={staff_client.cookies['sessionid'].value}".encode()
    for path, headers in (
        (f"/ws/c/{live_session.token}/", [(b"origin", origin)]),
        (f"/ws/sessions/{live_session.pk}/", [(b"origin", origin), (b"cookie", cookie)]),
    ):
        assert not async_to_sync(can_connect)(WebsocketCommunicator(_app(), path, headers))
    same = WebsocketCommunicator(_app(), f"/ws/c/{live_session.token}/", headers=[ORIGIN])
    assert async_to_sync(can_connect)(same)


def test_behind_tls_the_https_origin_is_the_sites_own(live_session, settings):
    from security.asgi import websocket_origin_allowed

    scope = {"type": "websocket", "scheme": "ws", "headers": [
        (b"host", b"interviews.example.org"), (b"origin", b"https://interviews.example.org"),
        (b"x-forwarded-proto", b"https")]}
    settings.BEHIND_TLS = False
    assert not websocket_origin_allowed(scope)  # the header is not trusted without a proxy
    settings.BEHIND_TLS = True
    assert websocket_origin_allowed(scope)
    scope["headers"][1] = (b"origin", b"http://interviews.example.org")
    assert not websocket_origin_allowed(scope)
    settings.CSRF_TRUSTED_ORIGINS = ["http://interviews.example.org"]
    assert websocket_origin_allowed(scope)


def test_a_revealed_hint_and_the_end_are_pushed_to_the_candidate(live_session, staff_client):
    async def scenario():
        cand = _candidate(live_session)
        await cand.connect()
        await _next(cand, "hello")
        await asyncio.get_running_loop().run_in_executor(None, lambda: staff_client.post(
            f"/sessions/{live_session.pk}/hints/0/reveal/"))
        hint = await _next(cand, "hint")
        await asyncio.get_running_loop().run_in_executor(None, lambda: staff_client.post(
            f"/sessions/{live_session.pk}/end/"))
        state = await _next(cand, "state")
        await cand.disconnect()
        return hint, state

    hint, state = async_to_sync(scenario)()
    assert hint == {"type": "hint", "number": 1}
    assert state["state"] == "ended" and state["readonly"] is True


def test_a_runs_status_changes_are_pushed_to_both_sides_and_nothing_else_of_it(
    live_session, staff_client, monkeypatch
):
    """Queued, running, done: each reaches both pads as the run's id and status only
    (never its verdict, output or code), so both pages fetch the run the moment it changes."""
    from runner import sandbox
    from runner.contract import make_result
    from runs import services

    result = make_result(exercise="x", verdict="wrong", message="what only the page shows")
    monkeypatch.setattr(sandbox, "grade", lambda *args, **kwargs: result)

    async def scenario():
        cand = _candidate(live_session)
        staff = _interviewer(live_session, staff_client)
        for ws in (cand, staff):
            await ws.connect()
            await _next(ws, "hello")
        run_in_thread = asyncio.get_running_loop().run_in_executor
        await run_in_thread(None, lambda: staff_client.post(
            f"/sessions/{live_session.pk}/runs/"))
        run = await run_in_thread(None, lambda: live_session.runs.get())
        seen = {"cand": [await _next(cand, "run")], "staff": [await _next(staff, "run")]}
        await run_in_thread(None, lambda: services.run_execute(run_id=run.pk))
        for name, ws in (("cand", cand), ("staff", staff)):
            seen[name] += [await _next(ws, "run"), await _next(ws, "run")]
            await ws.disconnect()
        return run.pk, seen

    run_id, seen = async_to_sync(scenario)()
    expected = [{"type": "run", "id": run_id, "status": status}
                for status in ("queued", "running", "done")]
    assert seen["cand"] == expected
    assert seen["staff"] == expected


CLOSED = ("Unexpected ASGI message 'websocket.send', after sending 'websocket.close' or "
          "response already completed.")


def test_an_event_for_a_browser_that_just_left_is_dropped_not_raised():
    """A group event can reach the consumer after the browser closed its socket but
    before the disconnect does; uvicorn then refuses the send (this RuntimeError). The
    consumer drops that event and every later one, instead of ending the connection's
    task with an "Exception in ASGI application" traceback in the server's log. (The
    server's send is stood in for here: the real race needs a close to land between two
    messages of the consumer.)"""
    from realtime.consumers import PadConsumer

    sent = []

    async def refused(message):
        sent.append(message)
        raise RuntimeError(CLOSED)

    async def other_error(message):
        raise RuntimeError("something else went wrong")

    async def scenario():
        gone = PadConsumer()
        gone.base_send = refused
        await gone._send({"type": "run", "id": 1, "status": "done"})
        await gone._send({"type": "run", "id": 1, "status": "done"})
        broken = PadConsumer()
        broken.base_send = other_error
        with pytest.raises(RuntimeError, match="something else"):
            await broken._send({"type": "run", "id": 1, "status": "done"})
        return gone

    gone = async_to_sync(scenario)()
    assert gone.closed is True and len(sent) == 1


def test_pulls_of_a_long_history_are_priced_and_a_flood_is_refused(live_session, settings):
    """A pull costs the server a read of the history: one socket asking again and again
    for a long one is refused after its budget, without reading it again."""
    settings.OVERLAP_PAD_PULL_BUDGET_PER_10S = 5
    text = live_session.pad_text
    for i in range(300):  # a long history: 300 updates
        pad.pad_push(session_id=live_session.pk, version=i,
                     updates=[{"clientID": "c", "changes": [[0, "x"], len(text) + i]}],
                     author=pad.author_for_candidate(live_session), check_rate=False)

    async def scenario():
        cand = _candidate(live_session)
        await cand.connect()
        await _next(cand, "hello")
        answers = []
        for _ in range(4):
            await cand.send_json_to({"type": "pull", "version": 0})
            answers.append(await cand.receive_json_from())
        await cand.disconnect()
        return answers

    answers = async_to_sync(scenario)()
    assert answers[0]["type"] == "updates" and len(answers[0]["updates"]) == 300
    # 1 + 300/100 = 4 of the 5 tokens: the next pull still passes, then the budget is
    # in debt and pulls are refused until it refills.
    assert answers[1]["type"] == "updates"
    assert [a["type"] for a in answers[2:]] == ["refused", "refused"]
    assert "Too many requests" in answers[2]["message"]


def test_one_candidate_link_may_open_only_a_few_sockets(live_session, settings):
    settings.OVERLAP_PAD_SOCKETS_PER_CLIENT = 2

    async def scenario():
        sockets = [_candidate(live_session) for _ in range(3)]
        results = [await ws.connect() for ws in sockets]
        await sockets[0].disconnect()
        again = _candidate(live_session)
        reopened = await again.connect()
        for ws in (sockets[1], again):
            await ws.disconnect()
        return results, reopened

    results, reopened = async_to_sync(scenario)()
    assert [ok for ok, _ in results] == [True, True, False]
    assert results[2][1] == 4429
    assert reopened[0] is True  # a closed tab frees its place
