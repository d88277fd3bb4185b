import json

import pytest

from interviews import services

pytestmark = pytest.mark.django_db


@pytest.fixture
def finished_session(staff_client, live_session, interviewer):
    token = live_session.token
    staff_client.post(f"/sessions/{live_session.pk}/hints/1/reveal/", {"out_of_order": "1"})
    criterion = live_session.exercise_version.guide["rubric"][0]
    staff_client.post(f"/sessions/{live_session.pk}/score/",
                      {"kind": "rubric", "key": criterion["key"], "score": 4, "note": "tidy"})
    staff_client.post(f"/sessions/{live_session.pk}/score/",
                      {"kind": "followup", "key": "0", "score": 3, "note": "knew staleness"})
    staff_client.post(f"/sessions/{live_session.pk}/notes/", {"notes": "Good communicator."})
    staff_client.post(f"/sessions/{live_session.pk}/recommendation/", {"recommendation": "yes"})
    from django.test import Client

    candidate = Client()
    candidate.post(f"/c/{token}/save/", {"code": "step = 1\n"})
    candidate.post(f"/c/{token}/save/", {"code": "step = 2\n"})
    services.session_end(session=live_session)
    return live_session


def test_scorecard_page_shows_scores_hints_notes_and_final_code(staff_client, finished_session):
    page = staff_client.get(f"/sessions/{finished_session.pk}/scorecard/").content.decode()
    assert "Hire" in page
    assert "4 / 4" in page and "1 of " in page
    assert "Hint 2 at" in page
    assert "Good communicator." in page
    assert "step = 2" in page
    assert 'type="range"' in page


def test_json_export_has_everything(staff_client, finished_session):
    response = staff_client.get(f"/sessions/{finished_session.pk}/scorecard.json")
    assert response["Content-Disposition"].startswith("attachment;")
    card = json.loads(response.content)
    assert card["recommendation"] == "Hire"
    assert card["rubric"][0]["score"] == 4 and card["rubric"][0]["note"] == "tidy"
    assert card["followups"][0]["score"] == 3
    assert [h["number"] for h in card["hints"]] == [2]
    assert card["final_code"] == "step = 2\n"
    assert [r["code"] for r in card["revisions"]][-2:] == ["step = 1\n", "step = 2\n"]


def test_markdown_export(staff_client, finished_session):
    text = staff_client.get(f"/sessions/{finished_session.pk}/scorecard.md").content.decode()
    assert text.startswith("# Scorecard: Lin")
    assert "Recommendation: **Hire**" in text
    assert "```python\nstep = 2\n```" in text


def test_replay_slider_fetches_each_revision(staff_client, finished_session):
    first = staff_client.get(f"/sessions/{finished_session.pk}/revisions/?n=2").content.decode()
    assert "step = 1" in first and "Revision 2" in first
    assert staff_client.get(f"/sessions/{finished_session.pk}/revisions/?n=99").status_code == 404
