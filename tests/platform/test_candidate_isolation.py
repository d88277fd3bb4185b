"""No interviewer-only text ever reaches the candidate's browser.

A whole session is played through; every response the candidate's browser receives is
kept and searched for the solution, the grader, unrevealed hints, expected answers, the
rubric, notes and good answers.
"""

import pytest

from interviews import services
from qa.models import Question

pytestmark = pytest.mark.django_db


def _distinctive_lines(text: str, exclude: str) -> list[str]:
    excluded = {line.strip() for line in exclude.splitlines()}
    return [line.strip() for line in text.splitlines()
            if len(line.strip()) > 30 and line.strip() not in excluded]


def _secrets(session) -> dict[str, list[str]]:
    version = session.exercise_version
    guide = version.guide
    files = version.files
    starter = files.get("starter.py", "")
    secrets = {
        "solution": _distinctive_lines(files.get("solution.py", ""), starter),
        "grader": _distinctive_lines(files.get("grader.py", ""), starter),
        "unrevealed hints": [h["prompt"] for h in guide["hints"][1:]],
        "expected answers": [h["expected_answer"] for h in guide["hints"]],
        "rubric": [c["description"] for c in guide["rubric"]]
        + [level["description"] for c in guide["rubric"] for level in c["levels"]],
        "follow-ups": [f["good_answer"] for f in guide["followups"]["questions"]],
        "walkthrough": guide["walkthrough"]["key_points"],
        "notes": ["PRIVATE-NOTE: strong on locks, weak on shutdown"],
        "score notes": ["PRIVATE-SCORE-NOTE about the candidate"],
        "bank answers": [q.answer for q in Question.objects.filter(
            pk__in=session.bank_questions.values("question"))],
    }
    for example in (name for name in files if name.startswith("examples/")):
        secrets["solution"] += _distinctive_lines(files[example], starter)[:3]
    return secrets


def test_every_candidate_response_is_free_of_interviewer_only_text(client, staff_client,
                                                                   synced, interviewer):
    from catalog.models import Exercise

    exercise = Exercise.objects.get(slug="async-gradient-accumulation")
    questions = list(Question.objects.filter(retired=False)[:2])
    session = services.session_create(interviewer=interviewer, exercise=exercise,
                                      candidate_name="Lin", candidate_email="lin@example.org",
                                      questions=questions)
    base = f"/c/{session.token}/"
    seen = [client.get(base), client.get(base + "state/?state=scheduled")]

    staff_client.post(f"/sessions/{session.pk}/start/")
    staff_client.post(f"/sessions/{session.pk}/notes/",
                      {"notes": "PRIVATE-NOTE: strong on locks, weak on shutdown"})
    criterion = session.exercise_version.guide["rubric"][0]
    staff_client.post(f"/sessions/{session.pk}/score/",
                      {"kind": "rubric", "key": criterion["key"], "score": 3,
                       "note": "PRIVATE-SCORE-NOTE about the candidate"})
    staff_client.post(f"/sessions/{session.pk}/hints/0/reveal/")
    seen += [
        client.get(base),
        client.get(base + "hints/"),
        client.get(base + "state/?state=live"),
        client.post(base + "save/", {"code": "print('hello')\n"}),
        client.post(base + "run/", {"code": "print('hello')\n"}),
    ]
    run = session.runs.get()
    seen.append(client.get(f"{base}runs/{run.pk}/"))
    staff_client.post(f"/sessions/{session.pk}/end/")
    seen += [client.get(base), client.post(base + "save/", {"code": "x"})]

    pages = "\n".join(response.content.decode() for response in seen)
    assert "Hint 1" in pages  # the revealed hint did arrive
    leaks = {kind: [text[:60] for text in texts if text and text.strip()[:200] in pages]
             for kind, texts in _secrets(session).items()}
    assert {kind: found for kind, found in leaks.items() if found} == {}


def test_the_secrets_list_is_not_empty(synced, live_session):
    secrets = _secrets(live_session)
    assert all(secrets[kind] for kind in ("unrevealed hints", "expected answers", "rubric",
                                          "follow-ups"))


@pytest.mark.django_db(transaction=True)
def test_the_candidates_push_channel_chat_and_playback_carry_nothing_interviewer_only(
        client, synced, interviewer):
    """Everything the candidate's WebSocket receives during a whole session (updates from
    both sides, cursors, chat, hint and state pushes) is searched the same way."""
    import asyncio
    import json

    from asgiref.sync import async_to_sync
    from django.contrib.auth.models import Group
    from django.test import Client

    from catalog.models import Exercise
    from tests.platform.ws_client import WebsocketCommunicator

    for name in ("interviewers", "authors"):
        Group.objects.get_or_create(name=name)
    from overlap.asgi import application

    staff = Client()
    staff.force_login(interviewer)
    exercise = Exercise.objects.get(slug="async-gradient-accumulation")
    questions = list(Question.objects.filter(retired=False)[:2])
    session = services.session_create(interviewer=interviewer, exercise=exercise,
                                      candidate_name="Lin", candidate_email="lin@example.org",
                                      questions=questions)
    staff.post(f"/sessions/{session.pk}/start/")
    origin = (b"origin", b"http://testserver")
    cookie = (b"cookie", f"sessionid={staff.cookies['sessionid'].value}".encode())
    received: list[str] = []

    async def drain(ws, seconds=0.5):
        # (A receive that times out would cancel the application: ask first.)
        while not await ws.receive_nothing(timeout=seconds):
            received.append(json.dumps(await ws.receive_json_from()))

    def in_thread(fn):
        return asyncio.get_running_loop().run_in_executor(None, fn)

    async def scenario():
        cand = WebsocketCommunicator(application, f"/ws/c/{session.token}/", headers=[origin])
        desk = WebsocketCommunicator(application, f"/ws/sessions/{session.pk}/",
                                     headers=[origin, cookie])
        await cand.connect()
        await desk.connect()
        await drain(cand)
        n = len(session.pad_text)
        await desk.send_json_to({"type": "push", "version": 0, "updates": [
            {"clientID": "staff", "changes": [[0, "# the interviewer typed this\n"], n]}]})
        await desk.send_json_to({"type": "presence", "anchor": 3, "head": 3})
        await desk.send_json_to({"type": "chat", "text": "How would you overlap validation?"})
        await in_thread(lambda: staff.post(f"/sessions/{session.pk}/notes/", {
            "notes": "PRIVATE-NOTE: strong on locks, weak on shutdown"}))
        criterion = session.exercise_version.guide["rubric"][0]
        await in_thread(lambda: staff.post(f"/sessions/{session.pk}/score/", {
            "kind": "rubric", "key": criterion["key"], "score": 3,
            "note": "PRIVATE-SCORE-NOTE about the candidate"}))
        await in_thread(lambda: staff.post(f"/sessions/{session.pk}/hints/0/reveal/"))
        await in_thread(lambda: staff.post(f"/sessions/{session.pk}/phase/",
                                           {"phase": "walkthrough"}))
        await in_thread(lambda: staff.post(f"/sessions/{session.pk}/readonly/",
                                           {"readonly": "1"}))
        await in_thread(lambda: staff.post(f"/sessions/{session.pk}/questions/",
                                           {"question": questions[0].pk}))
        await cand.send_json_to({"type": "chat", "text": "I would use a second stream."})
        await drain(cand)
        await in_thread(lambda: staff.post(f"/sessions/{session.pk}/end/"))
        await drain(cand)
        await cand.disconnect()
        await desk.disconnect()

    async_to_sync(scenario)()
    seen = "\n".join(received)
    assert "# the interviewer typed this" in seen and "second stream" in seen
    assert '"type": "hint"' in seen  # the reveal did arrive (as a number only)
    # The candidate's link never opens the playback or the scorecard.
    assert client.get(f"/sessions/{session.pk}/playback.json").status_code == 302
    leaks = {kind: [text[:60] for text in texts if text and text.strip()[:200] in seen]
             for kind, texts in _secrets(session).items()}
    assert {kind: found for kind, found in leaks.items() if found} == {}
