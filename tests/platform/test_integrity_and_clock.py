"""Integrity signals (pastes, leaving the page), the candidate's time left and the
interviewer's control of it, and the candidate's run history."""

import asyncio
from datetime import timedelta

import pytest
from asgiref.sync import async_to_sync
from django.urls import reverse
from django.utils import timezone

from interviews import clock, integrity, scorecard, services
from interviews.models import IntegrityEvent, InterviewSession
from runs.models import Run
from tests.platform.ws_client import WebsocketCommunicator

ORIGIN = (b"origin", b"http://testserver")


# ---- integrity: what is stored, bounded and ordered by the server ------------------------

def test_a_paste_is_stored_with_its_size_and_source_and_nothing_else(live_session):
    event = integrity.signal_record(session_id=live_session.pk, message={
        "kind": "paste", "chars": 1234, "source": "outside", "at": "2001-01-01T00:00:00Z"})
    assert (event.kind, event.chars, event.source) == ("paste", 1234, "outside")
    # The browser's idea of time is ignored: the server dates it.
    assert abs((event.created_at - timezone.now()).total_seconds()) < 5
    assert integrity.signal_label(event) == "Pasted 1,234 characters from outside the pad"
    # An unknown source is "outside" (never trusted to be harmless); sizes are bounded.
    odd = integrity.signal_record(session_id=live_session.pk, message={
        "kind": "paste", "chars": 10**12, "source": "<script>"})
    assert (odd.source, odd.chars) == ("outside", integrity.MAX_PASTE_CHARS)
    for bad in ({"kind": "paste", "chars": -1}, {"kind": "paste", "chars": "9"},
                {"kind": "paste", "chars": True}, {"kind": "keylog"}, "paste"):
        with pytest.raises(integrity.SignalRefused):
            integrity.signal_record(session_id=live_session.pk, message=bad)


def test_an_absence_lasts_from_away_to_back_on_the_servers_clock(live_session):
    away = integrity.signal_record(session_id=live_session.pk,
                                   message={"kind": "away", "reason": "blur"})
    assert integrity.signal_label(away).endswith("not back yet")
    # A second "away" while away is the same absence (a hidden tab says more than blur).
    again = integrity.signal_record(session_id=live_session.pk,
                                    message={"kind": "away", "reason": "hidden"})
    assert again.pk == away.pk
    IntegrityEvent.objects.filter(pk=away.pk).update(
        created_at=timezone.now() - timedelta(seconds=42))
    back = integrity.signal_record(session_id=live_session.pk, message={"kind": "back"})
    assert back.pk == away.pk and 41 <= back.away_seconds <= 44
    assert integrity.signal_label(back).startswith("Left the page for 4")
    assert "the tab was hidden" in integrity.signal_label(back)
    with pytest.raises(integrity.SignalRefused):  # nothing open to close
        integrity.signal_record(session_id=live_session.pk, message={"kind": "back"})
    integrity.signal_record(session_id=live_session.pk, message={"kind": "away"})
    services.session_end(session=live_session)
    live_session.refresh_from_db()
    assert integrity.signal_rows(live_session)[-1]["label"] == (
        "Left the page (another window had the focus); had not come back when the "
        "interview ended")


def test_signals_are_rate_limited_and_only_while_live(live_session):
    for _ in range(integrity.MAX_EVENTS_PER_MINUTE):
        integrity.signal_record(session_id=live_session.pk,
                                message={"kind": "paste", "chars": 3, "source": "pad"})
    with pytest.raises(integrity.SignalRefused):
        integrity.signal_record(session_id=live_session.pk,
                                message={"kind": "paste", "chars": 3, "source": "pad"})
    services.session_end(session=live_session)
    IntegrityEvent.objects.all().delete()
    with pytest.raises(integrity.SignalRefused):
        integrity.signal_record(session_id=live_session.pk,
                                message={"kind": "paste", "chars": 3, "source": "pad"})


def test_the_scorecard_playback_and_markdown_list_the_signals_escaped(live_session,
                                                                      staff_client):
    integrity.signal_record(session_id=live_session.pk,
                            message={"kind": "paste", "chars": 512, "source": "outside"})
    integrity.signal_record(session_id=live_session.pk, message={"kind": "away"})
    integrity.signal_record(session_id=live_session.pk, message={"kind": "back"})
    card = scorecard.scorecard_build(live_session)
    assert [s["kind"] for s in card["integrity"]] == ["paste", "away"]
    assert card["integrity_summary"]["outside_pastes"] == 1
    markers = scorecard.playback_data(live_session)["markers"]
    assert {m["kind"] for m in markers} >= {"signal-paste", "signal-away"}
    md = scorecard.scorecard_markdown(live_session)
    assert "## Integrity signals" in md
    assert "Pasted 512 characters from outside the pad" in md
    assert "Left the page for less than 1 s" in md
    page = staff_client.get(reverse("interviews:scorecard", args=[live_session.pk]))
    assert b"Pasted 512 characters from outside the pad" in page.content
    panel = staff_client.get(reverse("interviews:integrity", args=[live_session.pk]))
    assert b"Pasted 512 characters" in panel.content


def test_the_candidate_is_told_and_never_receives_the_signals(live_session, client):
    page = client.get(f"/c/{live_session.token}/")
    assert b"Pastes into the editor" in page.content
    lobby_session = services.session_create(
        interviewer=live_session.interviewer, exercise=live_session.exercise_version.exercise,
        candidate_name="Kim", candidate_email="kim@example.org")
    lobby = client.get(f"/c/{lobby_session.token}/")
    assert b"when you paste into the editor" in lobby.content
    # The candidate's pages have no route to the signals.
    assert client.get(f"/c/{live_session.token}/integrity/").status_code == 404


@pytest.mark.django_db(transaction=True)
def test_a_signal_over_the_candidate_socket_reaches_only_the_interviewer(live_session,
                                                                         staff_client):
    from overlap.asgi import application

    cookie = f"sessionid={staff_client.cookies['sessionid'].value}".encode()

    async def next_of(ws, kind, timeout=3):
        while True:
            message = await ws.receive_json_from(timeout=timeout)
            if message["type"] == kind:
                return message

    async def scenario():
        cand = WebsocketCommunicator(application, f"/ws/c/{live_session.token}/",
                                     headers=[ORIGIN])
        staff = WebsocketCommunicator(application, f"/ws/sessions/{live_session.pk}/",
                                      headers=[ORIGIN, (b"cookie", cookie)])
        assert (await cand.connect())[0] and (await staff.connect())[0]
        await next_of(cand, "hello")
        await next_of(staff, "hello")
        await cand.send_json_to({"type": "signal", "kind": "paste", "chars": 77,
                                 "source": "outside"})
        heard = await next_of(staff, "integrity")
        assert heard["kind"] == "paste"
        # The interviewer's socket cannot record signals for the candidate.
        await staff.send_json_to({"type": "signal", "kind": "paste", "chars": 5})
        await asyncio.sleep(0.3)
        seen = []
        while not await cand.receive_nothing(timeout=0.5):
            seen.append((await cand.receive_json_from())["type"])
        assert "integrity" not in seen  # the candidate never hears of the signals
        await cand.disconnect()
        await staff.disconnect()

    async_to_sync(scenario)()
    assert list(IntegrityEvent.objects.values_list("chars", flat=True)) == [77]


# ---- the clock -------------------------------------------------------------------------------

def test_time_left_counts_down_extends_and_pauses(live_session):
    allocation = live_session.exercise_version.time_minutes * 60
    start = live_session.started_at
    state = clock.clock_state(live_session, now=start + timedelta(seconds=100))
    assert state["left"] == allocation - 100 and not state["paused"]
    clock.clock_add(session=live_session, minutes=5)
    live_session.refresh_from_db()
    assert clock.clock_state(live_session, now=start + timedelta(seconds=100))["left"] \
        == allocation + 300 - 100
    clock.clock_pause(session=live_session, paused=True)
    live_session.refresh_from_db()
    paused_at = live_session.time_paused_at
    later = clock.clock_state(live_session, now=paused_at + timedelta(minutes=10))
    frozen = clock.clock_state(live_session, now=paused_at)
    assert later["paused"] and later["left"] == frozen["left"]  # paused time does not count
    InterviewSession.objects.filter(pk=live_session.pk).update(
        time_paused_at=paused_at - timedelta(seconds=60))
    live_session.refresh_from_db()
    clock.clock_pause(session=live_session, paused=False)
    live_session.refresh_from_db()
    assert live_session.time_paused_seconds >= 60 and live_session.time_paused_at is None
    with pytest.raises(clock.ClockError):
        clock.clock_add(session=live_session, minutes=-10_000)
    assert clock.clock_label(61) == "01:01 left" and clock.clock_label(-5) == "+00:05 over"


def test_the_interviewer_adds_time_and_both_pages_show_the_same_time_left(live_session,
                                                                          staff_client, client):
    url = reverse("interviews:clock", args=[live_session.pk])
    answer = staff_client.post(url, {"add": "5"})
    assert answer.status_code == 200
    live_session.refresh_from_db()
    assert live_session.time_extra_seconds == 300
    budget = live_session.exercise_version.time_minutes * 60 + 300
    staff_page = staff_client.get(reverse("interviews:console", args=[live_session.pk]))
    candidate_page = client.get(f"/c/{live_session.token}/")
    for page in (staff_page, candidate_page):
        assert f'data-budget="{budget}"'.encode() in page.content
    assert b"Time left" in candidate_page.content
    staff_client.post(url, {"pause": "1"})
    assert b"paused by your interviewer" in client.get(
        reverse("candidate:clock", args=[live_session.token])).content
    refused = staff_client.post(url, {"add": "abc"})
    assert b"Give the minutes as a number" in refused.content


# ---- the candidate's run history -------------------------------------------------------------

def test_the_candidate_lists_and_opens_each_earlier_run(live_session, client):
    first = Run.objects.create(session=live_session, code="x = 1", status=Run.DONE,
                               exercise_version=live_session.exercise_version,
                               verdict="wrong_result", requested_by="candidate",
                               result={"status": "fail", "metrics": {}, "checks": []})
    second = Run.objects.create(session=live_session, code="x = 2", status=Run.DONE,
                               exercise_version=live_session.exercise_version,
                                verdict="accepted", requested_by="candidate",
                                result={"status": "pass", "metrics": {"speedup": 1.75}})
    listing = client.get(reverse("candidate:run_list", args=[live_session.token]))
    text = listing.content.decode()
    assert text.index("Run 2") < text.index("Run 1")  # newest first
    assert "1.75\u00d7" in text
    for run in (first, second):
        assert reverse("candidate:run_status", args=[live_session.token, run.pk]) in text
    opened = client.get(reverse("candidate:run_status", args=[live_session.token, first.pk]))
    assert opened.status_code == 200 and f'id="run-{first.pk}"'.encode() in opened.content
    # Nothing of the interviewer's guide is in the list.
    guide = live_session.exercise_version.guide
    for criterion in guide["rubric"]:
        assert criterion["title"] not in text


# ---- a renewed link: the lobby stops waiting ------------------------------------------------

def test_the_lobby_poll_of_a_renewed_link_reloads_into_the_explanation(live_session, client):
    old = live_session.token
    services.token_renew(session=live_session)
    poll = client.get(f"/c/{old}/state/?state=scheduled", HTTP_HX_REQUEST="true")
    assert poll.status_code == 200 and poll["HX-Refresh"] == "true"
    page = client.get(f"/c/{old}/")
    assert page.status_code == 404
    assert b"Ask your interviewer for the current link" in page.content
