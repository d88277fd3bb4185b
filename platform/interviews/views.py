"""The interviewer's side: session list, creation, the live console and the scorecard."""

import json

from django.contrib import messages
from django.http import HttpResponse, HttpResponseBadRequest
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from interviews import scorecard as scorecards
from interviews import selectors, services
from interviews.forms import SessionForm
from interviews.models import InterviewSession, Score
from overlap import jobs
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
    hints = [
        {**hint, "index": i, "number": i + 1, "reveal": revealed.get(i)}
        for i, hint in enumerate(guide["hints"])
    ]
    return {
        "session": session,
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
    }


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
    return _act(request, pk,
                lambda s: services.session_set_phase(session=s, phase=request.POST.get("phase")))


def live_code(request, pk):
    """The candidate's latest saved code (polled every second by the console)."""
    session = selectors.session_for_staff(request.user, pk)
    response = render(request, "interviews/console.html#live-code",
                      {"session": session, "revision": services.latest_revision(session)})
    if session.is_ended:
        response.status_code = STOP_POLLING
    return response


def runs_panel(request, pk):
    session = selectors.session_for_staff(request.user, pk)
    if request.method == "POST":
        revision = services.latest_revision(session)
        try:
            run_services.run_create(session=session, code=revision.code if revision else "",
                                    requested_by="interviewer")
        except run_services.RunRefused as exc:
            messages.error(request, str(exc))
        except jobs.BrokerUnavailable as exc:
            messages.error(request, exc.message)
    runs = list(session.runs.all()[:20])
    return render(request, "interviews/console.html#runs",
                  {"session": session, "runs": [run_view(run) for run in runs]})


@require_POST
def hint_reveal(request, pk, index):
    session = selectors.session_for_staff(request.user, pk)
    try:
        services.hint_reveal(session=session, index=index, by=request.user)
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
    context = {"session": session, "card": card,
               "rev": session.revisions.order_by("-number").first()}
    return render(request, "interviews/scorecard.html", context)


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
