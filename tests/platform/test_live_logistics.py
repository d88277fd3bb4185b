"""Running a live session: lobby, countdowns, questions picked during the session,
invitation e-mail, chat in the scorecard, playback data, Markdown export, verdict labels."""

import json
from datetime import UTC, datetime

import pytest
from django.core import mail
from django.test import Client

from content.markdown import render_markdown
from interviews import pad, scorecard, services
from interviews.models import InterviewSession
from qa.models import Question
from runs.labels import VERDICT_LABELS, verdict_label

pytestmark = pytest.mark.django_db


@pytest.fixture
def planned_session(synced, interviewer):
    from catalog.models import Exercise

    return services.session_create(
        interviewer=interviewer, exercise=Exercise.objects.get(slug="async-parameter-server"),
        candidate_name="Lin", candidate_email="lin@example.org",
        scheduled_at=datetime(2026, 12, 1, 14, 30, tzinfo=UTC), time_zone="Europe/Berlin")


def test_lobby_says_who_the_candidate_meets_and_when_and_never_blanks_itself(
        client, planned_session, interviewer):
    interviewer.first_name, interviewer.last_name = "Ada", "Lovelace"
    interviewer.save()
    page = client.get(f"/c/{planned_session.token}/").content.decode()
    assert "Ada Lovelace" in page
    assert "15:30 (Europe/Berlin)" in page  # 14:30 UTC is 15:30 in Berlin in December
    # The poll only answers "reload when started" (empty body): it must never be swapped in.
    lobby = page[page.index('<article class="lobby"'):page.index("</article>", page.index(
        '<article class="lobby"'))]
    assert 'hx-swap="none"' in lobby
    assert client.get(f"/c/{planned_session.token}/state/?state=scheduled").content == b""


def test_new_session_form_takes_a_planned_start_in_a_time_zone(staff_client, synced):
    from catalog.models import Exercise

    exercise = Exercise.objects.get(slug="async-parameter-server")
    response = staff_client.post("/sessions/new/", {
        "exercise": exercise.pk, "candidate_name": "Mo", "candidate_email": "mo@example.org",
        "scheduled_at": "2026-12-01T09:00", "time_zone": "America/New_York"})
    assert response.status_code == 302
    session = InterviewSession.objects.get(candidate_name="Mo")
    assert session.scheduled_at == datetime(2026, 12, 1, 14, 0, tzinfo=UTC)
    assert session.time_zone == "America/New_York"


def test_invitation_email_has_the_link_and_the_time_in_the_zone(staff_client, planned_session):
    response = staff_client.post(f"/sessions/{planned_session.pk}/invite/")
    assert response.status_code == 302
    assert len(mail.outbox) == 1
    message = mail.outbox[0]
    assert message.to == ["lin@example.org"]
    assert f"/c/{planned_session.token}/" in message.body
    assert "15:30 (Europe/Berlin; 14:30 UTC)" in message.body
    planned_session.refresh_from_db()
    assert planned_session.invited_at is not None
    console = staff_client.get(f"/sessions/{planned_session.pk}/").content.decode()
    assert "Send the invitation again" in console and "Copy link" in console


def test_console_counts_down_each_phase_and_the_allocation(staff_client, live_session):
    guide = live_session.exercise_version.guide
    page = staff_client.get(f"/sessions/{live_session.pk}/").content.decode()
    assert f'data-budget="{live_session.exercise_version.time_minutes * 60}"' in page
    assert f'data-budget="{guide["introduction"]["minutes"] * 60}"' in page  # current phase
    # Switching phase swaps the phase bar in place (no reload, no history entry).
    response = staff_client.post(f"/sessions/{live_session.pk}/phase/", {"phase": "coding"},
                                 headers={"HX-Request": "true"})
    html = response.content.decode()
    assert response.status_code == 200 and html.lstrip().startswith('<nav class="phases"')
    assert 'aria-current="step"' in html and f'data-budget="{guide["coding"]["minutes"] * 60}"' \
        in html
    live_session.refresh_from_db()
    assert live_session.phase == "coding"


def test_questions_are_searched_by_their_text_and_added_during_the_session(
        staff_client, client, live_session):
    question = Question.objects.filter(retired=False).first()
    word = max(question.text.split(), key=len).strip(".,?()`")
    found = staff_client.get(f"/sessions/{live_session.pk}/questions/?q={word}").content.decode()
    assert question.text[:40] in found  # the question itself, not a slug
    added = staff_client.post(f"/sessions/{live_session.pk}/questions/",
                              {"question": question.pk}).content.decode()
    assert render_markdown(question.text) in added
    assert render_markdown(question.answer) in added  # with its good answer in view
    assert 'id="question-results" class="question-results" hx-swap-oob="true"' in added
    assert live_session.bank_questions.filter(question=question).exists()
    # Already picked: no longer offered.
    again = staff_client.get(f"/sessions/{live_session.pk}/questions/?q={word}").content.decode()
    assert f'"question": "{question.pk}"' not in again
    candidate_page = Client().get(f"/c/{live_session.token}/").content.decode()
    assert render_markdown(question.answer) not in candidate_page


def test_hints_are_revealed_in_order_unless_deliberately_out_of_order(staff_client,
                                                                     live_session):
    skipped = staff_client.post(f"/sessions/{live_session.pk}/hints/1/reveal/")
    assert skipped.status_code == 400 and "Hint 1 has not been revealed" in \
        skipped.content.decode()
    assert staff_client.post(f"/sessions/{live_session.pk}/hints/1/reveal/",
                             {"out_of_order": "1"}).status_code == 200
    page = staff_client.get(f"/sessions/{live_session.pk}/").content.decode()
    assert 'hx-confirm="Reveal hint 1 to the candidate now?"' in page


def test_chat_is_in_the_scorecard_and_its_markdown(staff_client, live_session, interviewer):
    services.chat_post(session=live_session, role="interviewer", author="ada",
                       text="Start with the data queue.")
    services.chat_post(session=live_session, role="candidate", author="Lin",
                       text="Will do, thanks")
    services.session_end(session=live_session)
    page = staff_client.get(f"/sessions/{live_session.pk}/scorecard/").content.decode()
    assert "Start with the data queue." in page and "Will do, thanks" in page
    markdown = staff_client.get(f"/sessions/{live_session.pk}/scorecard.md").content.decode()
    assert "**Lin**: Will do, thanks" in markdown


def test_markdown_export_fences_code_that_contains_backticks(staff_client, live_session):
    code = 'doc = """\n```\n# Injected heading\n```\n"""\n'
    pad.pad_replace(session_id=live_session.pk, text=code,
                    author=pad.author_for_candidate(live_session))
    markdown = staff_client.get(f"/sessions/{live_session.pk}/scorecard.md").content.decode()
    fence = scorecard.code_fence(code)
    assert fence == "````"
    assert f"{fence}python\n{code.rstrip()}\n{fence}\n" in markdown


def test_playback_has_every_keystroke_with_its_author_and_run_and_hint_markers(
        staff_client, client, live_session):
    start = live_session.pad_text
    pad.pad_push(session_id=live_session.pk, version=0,
                 updates=[{"clientID": "c", "changes": [[0, "a"], len(start)]},
                          {"clientID": "c", "changes": [1, [0, "b"], len(start)]}],
                 author=pad.author_for_candidate(live_session))
    staff_client.post(f"/sessions/{live_session.pk}/hints/0/reveal/")
    client.post(f"/c/{live_session.token}/run/", {"version": "2"})
    data = json.loads(staff_client.get(f"/sessions/{live_session.pk}/playback.json").content)
    assert data["base"] == start
    assert [(u[1], u[2], u[3]) for u in data["updates"]] == [
        ("candidate", "Lin", [[0, "a"], len(start)]),
        ("candidate", "Lin", [1, [0, "b"], len(start)])]
    assert [m["kind"] for m in data["markers"]] == ["hint", "run"]
    # Without a staff login (the candidate has none) there is no playback.
    assert Client().get(f"/sessions/{live_session.pk}/playback.json").status_code == 302


def test_every_verdict_key_has_a_human_label():
    from runs.models import Run

    for key in VERDICT_LABELS:
        assert verdict_label(key) and "_" not in verdict_label(key)
    assert verdict_label("too_slow") == "Correct, but not fast enough"
    assert verdict_label("brand_new_verdict") == "Brand new verdict"
    assert Run  # the labels module stands alone: the lead may point it elsewhere


def test_scorecard_shows_labels_not_keys_and_every_run_opens(staff_client, client,
                                                             live_session):
    client.post(f"/c/{live_session.token}/run/", {"code": "x = 1\n"})
    run = live_session.runs.get()
    type(run).objects.filter(pk=run.pk).update(
        status="done", verdict="too_slow",
        result={"status": "fail", "checks": [{"name": "speedup", "status": "fail",
                                               "message": "1.1x < 1.5x"}], "metrics": {}})
    services.session_end(session=live_session)
    page = staff_client.get(f"/sessions/{live_session.pk}/scorecard/").content.decode()
    assert "Correct, but not fast enough" in page and ">too_slow<" not in page
    assert f'id="run-row-{run.pk}"' in page and "1.1x &lt; 1.5x" in page
    assert "yours" not in page  # no time line for a run without a candidate time


def test_print_stylesheet_never_clips_code(client):
    from pathlib import Path

    from django.contrib.staticfiles import finders

    css = Path(finders.find("overlap/site.css")).read_text()
    print_rules = css[css.index("Printing a scorecard"):]
    assert "max-height: none !important" in print_rules
    assert "overflow: visible !important" in print_rules


def test_markdown_export_renders_nothing_a_candidate_wrote_as_markup(
        staff_client, live_session):
    import markdown as md

    live_session.candidate_name = "Lin <img src=x onerror=alert(1)>"
    live_session.save(update_fields=["candidate_name"])
    services.chat_post(session=live_session, role="candidate", author="Lin",
                       text="<script>alert(1)</script> [click](javascript:alert(2)) **bold**\n"
                            "# heading\n- item")
    services.session_end(session=live_session)
    text = staff_client.get(f"/sessions/{live_session.pk}/scorecard.md").content.decode()
    # Rendered as a Markdown viewer would (raw HTML allowed): the candidate's text is shown,
    # none of it becomes an element, a link, emphasis or a heading.
    html = md.markdown(text)
    for markup in ("<img", "<script", "<a ", "<strong>bold", "<h1>heading"):
        assert markup not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "Lin &lt;img src=x onerror=alert(1)&gt;" in html


def test_the_candidate_never_sees_the_interviewers_login_name(live_session, interviewer):
    assert interviewer.get_full_name() == ""
    author = pad.author_for_interviewer(interviewer)
    assert author.name == "Interviewer" and interviewer.get_username() not in author.name
    interviewer.first_name, interviewer.last_name = "Ada", "Byron"
    interviewer.save()
    assert pad.author_for_interviewer(interviewer).name == "Ada Byron"


def test_a_renewed_candidate_link_gets_a_page_that_says_what_to_do(client, live_session):
    from interviews import services as session_services

    old = live_session.token
    session_services.token_renew(session=live_session)
    response = client.get(f"/c/{old}/")
    assert response.status_code == 404
    body = response.content.decode()
    assert "Ask your interviewer for the current link" in body
    assert "<link rel=\"stylesheet\"" in body  # the site's page, not a bare "Not Found"
