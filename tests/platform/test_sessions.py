"""Session lifecycle, the candidate link, autosave and who sees which session."""

import json
import re

import pytest
from django.contrib.auth.models import Group, User

from catalog.models import Exercise
from content.services import content_sync
from interviews import services
from interviews.models import InterviewSession

pytestmark = pytest.mark.django_db


def _create(staff_client, **extra):
    exercise = Exercise.objects.get(slug="async-parameter-server")
    data = {"exercise": exercise.pk, "candidate_name": "Lin", "candidate_email": "lin@example.org",
            **extra}
    response = staff_client.post("/sessions/new/", data)
    assert response.status_code == 302, response.content
    return InterviewSession.objects.latest("created_at")


def test_interviewer_creates_a_session_with_a_pinned_version_and_a_candidate_link(
        staff_client, synced):
    session = _create(staff_client)
    assert session.state == "scheduled"
    assert session.exercise_version == Exercise.objects.get(
        slug="async-parameter-server").current_version
    assert len(session.token) >= 40
    console = staff_client.get(f"/sessions/{session.pk}/").content.decode()
    assert f"/c/{session.token}/" in console
    assert "Start session" in console


def test_a_session_keeps_its_version_when_the_exercise_changes(staff_client, content_dir):
    content_sync(root=content_dir)
    session = _create(staff_client)
    prompt = content_dir / "async-parameter-server" / "prompt.md"
    prompt.write_text("Rewritten prompt.\n")
    content_sync(root=content_dir)
    session.refresh_from_db()
    assert session.exercise_version.number == 1
    page = staff_client.get(f"/c/{session.token}/").content.decode()
    assert "Rewritten prompt." not in page


def test_candidate_waits_in_the_lobby_until_the_interviewer_starts(client, staff_client, synced):
    session = _create(staff_client)
    lobby = client.get(f"/c/{session.token}/").content.decode()
    assert "Waiting for the interviewer to start" in lobby
    assert 'id="editor"' not in lobby
    # Polling the state: nothing to do while scheduled…
    assert "HX-Refresh" not in client.get(f"/c/{session.token}/state/?state=scheduled")
    staff_client.post(f"/sessions/{session.pk}/start/")
    # …and a reload once the interviewer started.
    assert client.get(f"/c/{session.token}/state/?state=scheduled")["HX-Refresh"] == "true"
    live = client.get(f"/c/{session.token}/").content.decode()
    assert 'id="editor"' in live


def _initial_code(page: str) -> str:
    match = re.search(r'<script id="initial-code" type="application/json">(.*?)</script>', page,
                      re.S)
    return json.loads(match.group(1))


def test_candidate_workspace_starts_with_the_starter_code(client, live_session):
    page = client.get(f"/c/{live_session.token}/").content.decode()
    assert _initial_code(page) == live_session.exercise_version.files.get("starter.py", "")


def test_autosave_keeps_every_distinct_revision(client, live_session):
    url = f"/c/{live_session.token}/save/"
    assert client.post(url, {"code": "a = 1\n"})["X-Revision"] == "2"
    assert client.post(url, {"code": "a = 1\n"})["X-Revision"] == "2"  # unchanged: no copy
    assert client.post(url, {"code": "a = 2\n"})["X-Revision"] == "3"
    codes = list(live_session.revisions.values_list("code", flat=True))
    assert codes[1:] == ["a = 1\n", "a = 2\n"]
    # A reload restores the latest revision.
    assert _initial_code(client.get(f"/c/{live_session.token}/").content.decode()) == "a = 2\n"


def test_oversized_code_is_refused_with_a_clear_message(client, live_session, settings):
    settings.OVERLAP_MAX_CODE_BYTES = 1024
    response = client.post(f"/c/{live_session.token}/save/", {"code": "x" * 2000})
    assert response.status_code == 409
    assert "larger than 1 KiB" in response.content.decode()


def test_ended_session_is_read_only_for_the_candidate(client, staff_client, live_session):
    client.post(f"/c/{live_session.token}/save/", {"code": "final = True\n"})
    response = staff_client.post(f"/sessions/{live_session.pk}/end/")
    assert response["Location"] == f"/sessions/{live_session.pk}/scorecard/"
    page = client.get(f"/c/{live_session.token}/").content.decode()
    assert "This interview has ended" in page and "final = True" in page
    assert client.post(f"/c/{live_session.token}/save/", {"code": "later"}).status_code == 410
    assert client.post(f"/c/{live_session.token}/run/", {"code": "later"}).status_code == 410
    assert live_session.revisions.filter(code="later").count() == 0


def test_a_wrong_token_reaches_nothing(client, live_session):
    assert client.get("/c/not-the-token/").status_code == 404
    assert client.post("/c/not-the-token/save/", {"code": "x"}).status_code == 404


def test_the_token_does_not_open_staff_pages(client, live_session):
    response = client.get(f"/sessions/{live_session.pk}/")
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_interviewers_see_only_their_sessions_authors_see_all(client, live_session, author):
    other = User.objects.create_user("bob", password="correct horse battery")
    other.groups.add(Group.objects.get(name="interviewers"))  # another interviewer
    client.force_login(other)
    assert client.get(f"/sessions/{live_session.pk}/").status_code == 404
    assert "Lin" not in client.get("/sessions/").content.decode()
    client.force_login(author)
    assert client.get(f"/sessions/{live_session.pk}/").status_code == 200
    assert "Lin" in client.get("/sessions/").content.decode()


def test_hint_appears_for_the_candidate_only_after_it_is_revealed(client, staff_client,
                                                                  live_session, interviewer):
    hints = live_session.exercise_version.guide["hints"]
    before = client.get(f"/c/{live_session.token}/hints/").content.decode()
    assert hints[0]["prompt"][:40] not in before
    staff_client.post(f"/sessions/{live_session.pk}/hints/0/reveal/")
    reveal = live_session.hint_reveals.get()
    assert reveal.revealed_by == interviewer and reveal.revealed_at
    after = client.get(f"/c/{live_session.token}/hints/").content.decode()
    assert "Hint 1" in after
    assert hints[1]["prompt"][:40] not in after
    assert hints[0]["expected_answer"][:40] not in after


def test_phases_move_and_record_when(staff_client, live_session):
    staff_client.post(f"/sessions/{live_session.pk}/phase/", {"phase": "coding"})
    live_session.refresh_from_db()
    assert live_session.phase == "coding" and live_session.phase_started_at


def test_rubric_scores_only_take_the_criterion_levels(staff_client, live_session):
    criterion = live_session.exercise_version.guide["rubric"][0]
    top = criterion["levels"][-1]["score"]
    url = f"/sessions/{live_session.pk}/score/"
    ok = staff_client.post(url, {"kind": "rubric", "key": criterion["key"], "score": top,
                                 "note": "clean locking"})
    assert ok.status_code == 200
    score = live_session.scores.get(kind="rubric", key=criterion["key"])
    assert (score.score, score.note) == (top, "clean locking")
    bad = staff_client.post(url, {"kind": "rubric", "key": criterion["key"], "score": 99})
    assert bad.status_code == 400 and "not one of" in bad.content.decode()
    unknown = staff_client.post(url, {"kind": "rubric", "key": "nope", "score": 1})
    assert unknown.status_code == 400


def test_session_service_refuses_to_start_twice(live_session):
    with pytest.raises(services.SessionError):
        services.session_start(session=live_session)
