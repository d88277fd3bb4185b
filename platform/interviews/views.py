"""The interviewer's side: session list, creation, the live console and the scorecard."""

import json

from django.conf import settings
from django.contrib import messages
from django.http import HttpResponse, HttpResponseBadRequest, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.html import format_html
from django.views.decorators.http import require_POST

from interviews import clock as clocks
from interviews import integrity, pad, selectors, services
from interviews import scorecard as scorecards
from interviews.forms import SessionForm
from interviews.models import InterviewSession, Score
from overlap import jobs
from qa.models import Question
from runs import services as run_services
from runs.selectors import run_view

STOP_POLLING = 286  # htmx stops polling on this status


def session_list(request):
    sessions = selectors.sessions_visible_to(request.user)
    return render(request, "interviews/session_list.html", {"sessions": sessions})


def session_new(request):
    form = SessionForm(request.POST or None, initial={"exercise": request.GET.get("exercise")})
    if request.method == "POST" and form.is_valid():
        session = services.session_create(
            interviewer=request.user,
            exercise=form.cleaned_data["exercise"],
            candidate_name=form.cleaned_data["candidate_name"],
            candidate_email=form.cleaned_data["candidate_email"],
            questions=form.cleaned_data["questions"],
            scheduled_at=form.cleaned_data.get("scheduled_at"),
            time_zone=form.cleaned_data.get("time_zone") or "UTC",
        )
        return redirect("interviews:console", pk=session.pk)
    return render(request, "interviews/session_new.html", {"form": form})


def _console_context(request, session: InterviewSession) -> dict:
    guide = session.exercise_version.guide
    scores = selectors.scores_by_key(session)
    revealed = {r.index: r for r in session.hint_reveals.select_related("revealed_by")}
    rubric = [
        {**criterion, "current": scores.get((Score.RUBRIC, criterion["key"]))}
        for criterion in guide["rubric"]
    ]
    followups = [
        {**item, "key": str(i), "current": scores.get((Score.FOLLOWUP, str(i)))}
        for i, item in enumerate(guide["followups"]["questions"])
    ]
    bank_questions = [
        {"question": sq.question, "key": str(sq.question_id),
         "current": scores.get((Score.QUESTION, str(sq.question_id)))}
        for sq in session.bank_questions.select_related("question__bank")
    ]
    missing = [i for i in range(len(guide["hints"])) if i not in revealed]
    hints = [
        {**hint, "index": i, "number": i + 1, "reveal": revealed.get(i),
         "next": bool(missing) and missing[0] == i,
         "first_missing": missing[0] + 1 if missing else None}
        for i, hint in enumerate(guide["hints"])
    ]
    return {
        "session": session,
        "phase_list": _phase_list(session),
        "allocation_seconds": session.exercise_version.time_minutes * 60,
        "scheduled_label": selectors.scheduled_label(session),
        "link_hours": settings.OVERLAP_CANDIDATE_LINK_HOURS,
        "question_query": "",
        "version": session.exercise_version,
        "guide": guide,
        "hints": hints,
        "rubric": rubric,
        "followups": followups,
        "bank_questions": bank_questions,
        "question_scores": services.QUESTION_SCORES,
        "candidate_url": request.build_absolute_uri(f"/c/{session.token}/"),
        "revision": services.latest_revision(session),
        "runs": [run_view(run) for run in session.runs.all()[:20]],
        "phases": InterviewSession.PHASES,
        **_integrity_context(session),
        "clock": clocks.clock_state(session),
    }


def _integrity_context(session: InterviewSession) -> dict:
    rows = integrity.signal_rows(session)
    return {"signals": rows[::-1], "signal_summary": integrity.signal_summary(rows)}


def integrity_panel(request, pk):
    """Pastes and absences, newest first (fetched the moment one is pushed)."""
    session = selectors.session_for_staff(request.user, pk)
    return render(request, "interviews/console.html#integrity",
                  {"session": session, **_integrity_context(session)})


def clock(request, pk):
    """The time left (GET), or the interviewer's change of it (POST: add=<minutes>, or
    pause=1/0); every change is pushed to the candidate's page at once."""
    session = selectors.session_for_staff(request.user, pk)
    error = ""
    if request.method == "POST":
        try:
            if "add" in request.POST:
                clocks.clock_add(session=session, minutes=int(request.POST["add"]))
            elif "pause" in request.POST:
                clocks.clock_pause(session=session, paused=request.POST["pause"] == "1")
        except ValueError:
            error = "Give the minutes as a number."
        except clocks.ClockError as exc:
            error = str(exc)  # said next to the buttons (htmx swaps only 2xx answers)
        session.refresh_from_db()
    return render(request, "interviews/console.html#clock",
                  {"session": session, "version": session.exercise_version,
                   "clock": clocks.clock_state(session), "clock_error": error})


def _phase_list(session: InterviewSession) -> list[dict]:
    """Each phase with its planned minutes from the guide (the walkthrough gets what the
    allocation leaves, at least 5 minutes)."""
    guide = session.exercise_version.guide
    minutes = {"introduction": guide["introduction"]["minutes"],
               "coding": guide["coding"]["minutes"], "followups": guide["followups"]["minutes"]}
    planned = sum(minutes.values())
    minutes["walkthrough"] = max(5, session.exercise_version.time_minutes - planned)
    return [{"key": key, "label": label, "minutes": minutes[key],
             "seconds": minutes[key] * 60, "current": session.phase == key}
            for key, label in InterviewSession.PHASES]


def console(request, pk):
    session = selectors.session_for_staff(request.user, pk)
    return render(request, "interviews/console.html", _console_context(request, session))


def _act(request, pk, action) -> HttpResponse:
    """Run a state-changing service; report refusals as a message; back to the console."""
    session = selectors.session_for_staff(request.user, pk)
    try:
        action(session)
    except services.SessionError as exc:
        messages.error(request, str(exc))
    return redirect("interviews:console", pk=pk)


@require_POST
def session_start(request, pk):
    return _act(request, pk, lambda s: services.session_start(session=s))


@require_POST
def session_end(request, pk):
    response = _act(request, pk, lambda s: services.session_end(session=s))
    session = selectors.session_for_staff(request.user, pk)
    return redirect("interviews:scorecard", pk=pk) if session.is_ended else response


@require_POST
def session_phase(request, pk):
    """Switch phase in place (htmx swaps the phase bar: no reload, no history entry)."""
    session = selectors.session_for_staff(request.user, pk)
    try:
        services.session_set_phase(session=session, phase=request.POST.get("phase"))
    except services.SessionError as exc:
        return HttpResponseBadRequest(str(exc))
    if not request.htmx:
        return redirect("interviews:console", pk=pk)
    session.refresh_from_db()
    return render(request, "interviews/console.html#phases",
                  {"session": session, "phase_list": _phase_list(session)})


@require_POST
def renew_link(request, pk):
    session = selectors.session_for_staff(request.user, pk)
    services.token_renew(session=session)
    messages.success(request, "A new candidate link was issued; the old one no longer works.")
    return redirect("interviews:console", pk=pk)


@require_POST
def invite(request, pk):
    session = selectors.session_for_staff(request.user, pk)
    link = request.build_absolute_uri(f"/c/{session.token}/")
    try:
        services.invitation_send(session=session, link=link)
    except services.SessionError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Invitation e-mailed to {session.candidate_email}.")
    return redirect("interviews:console", pk=pk)


def live_code(request, pk):
    """The pad's authoritative text (the console itself gets it pushed over WebSocket)."""
    session = selectors.session_for_staff(request.user, pk)
    response = HttpResponse(format_html('<pre class="code-view" id="live-code"><code>{}</code>'
                                        "</pre>", session.pad_text))
    if session.is_ended:
        response.status_code = STOP_POLLING
    return response


def runs_panel(request, pk):
    session = selectors.session_for_staff(request.user, pk)
    if request.method == "POST":
        try:
            # The pad's authoritative text, as the candidate's runs.
            revision = pad.pad_checkpoint(session)
            run_services.run_create(session=session, code=revision.code if revision else "",
                                    requested_by="interviewer")
        except run_services.RunRefused as exc:
            messages.error(request, str(exc))
        except jobs.BrokerUnavailable as exc:
            messages.error(request, exc.message)
    runs = list(session.runs.all()[:20])
    return render(request, "interviews/console.html#runs",
                  {"session": session, "runs": [run_view(run) for run in runs],
                   "latest_oob": True})


@require_POST
def hint_reveal(request, pk, index):
    session = selectors.session_for_staff(request.user, pk)
    try:
        services.hint_reveal(session=session, index=index, by=request.user,
                             out_of_order=request.POST.get("out_of_order") == "1")
    except services.SessionError as exc:
        return HttpResponseBadRequest(str(exc))
    context = _console_context(request, session)
    return render(request, "interviews/console.html#hints", context)


@require_POST
def score(request, pk):
    session = selectors.session_for_staff(request.user, pk)
    raw = request.POST.get("score", "")
    try:
        value = int(raw) if raw else None
        services.score_set(session=session, kind=request.POST.get("kind", ""),
                           key=request.POST.get("key", ""), score=value,
                           note=request.POST.get("note"))
    except (ValueError, services.SessionError) as exc:
        return HttpResponseBadRequest(str(exc))
    return HttpResponse('<span class="saved">Saved</span>')


@require_POST
def readonly(request, pk):
    session = selectors.session_for_staff(request.user, pk)
    services.readonly_set(session=session, readonly=request.POST.get("readonly") == "1")
    return HttpResponse(status=204)


@require_POST
def notes(request, pk):
    session = selectors.session_for_staff(request.user, pk)
    services.notes_set(session=session, notes=request.POST.get("notes", ""))
    return HttpResponse('<span class="saved">Notes saved</span>')


@require_POST
def recommendation(request, pk):
    session = selectors.session_for_staff(request.user, pk)
    try:
        services.recommendation_set(session=session,
                                    recommendation=request.POST.get("recommendation", ""))
    except services.SessionError as exc:
        return HttpResponseBadRequest(str(exc))
    return HttpResponse('<span class="saved">Saved</span>')


def scorecard(request, pk):
    session = selectors.session_for_staff(request.user, pk)
    card = scorecards.scorecard_build(session)
    runs = [run_view(run) for run in session.runs.order_by("created_at")]
    context = {"session": session, "card": card, "run_views": runs,
               "rev": session.revisions.order_by("-number").first()}
    return render(request, "interviews/scorecard.html", context)


def playback_json(request, pk):
    session = selectors.session_for_staff(request.user, pk)
    return JsonResponse(scorecards.playback_data(session))


def scorecard_json(request, pk):
    session = selectors.session_for_staff(request.user, pk)
    response = HttpResponse(json.dumps(scorecards.scorecard_build(session, for_export=True),
                                       indent=2, default=str),
                            content_type="application/json")
    response["Content-Disposition"] = f'attachment; filename="scorecard-{session.pk}.json"'
    return response


def scorecard_markdown(request, pk):
    session = selectors.session_for_staff(request.user, pk)
    response = HttpResponse(scorecards.scorecard_markdown(session),
                            content_type="text/markdown; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="scorecard-{session.pk}.md"'
    return response


def revision(request, pk):
    """One saved revision of the code (?n=3), for the scorecard's replay slider."""
    session = selectors.session_for_staff(request.user, pk)
    try:
        number = int(request.GET.get("n", ""))
    except ValueError:
        return HttpResponseBadRequest("n must be a revision number")
    rev = get_object_or_404(session.revisions, number=number)
    return render(request, "interviews/scorecard.html#revision", {"rev": rev})


def questions(request, pk):
    """Pick Q&A questions during the session: GET searches (question text shown), POST adds."""
    session = selectors.session_for_staff(request.user, pk)
    if request.method == "POST":
        question = get_object_or_404(Question, pk=request.POST.get("question", "0") or 0)
        try:
            services.question_add(session=session, question=question)
        except services.SessionError as exc:
            return HttpResponseBadRequest(str(exc))
        response = render(request, "interviews/console.html#bank-questions",
                          _console_context(request, session))
        # The picked question leaves the search results (out-of-band swap).
        response.content += b'<ul id="question-results" class="question-results" ' \
            b'hx-swap-oob="true"></ul>'
        return response
    query = request.GET.get("q", "").strip()[:200]
    return render(request, "interviews/console.html#question-results",
                  {"session": session, "question_query": query,
                   "found": selectors.questions_matching(session, query)})
