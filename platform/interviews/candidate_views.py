"""The candidate's side, reached only through the session's unguessable token.

Everything here renders from candidate-safe data only: the prompt, the candidate's own
code and runs, and the prompt text of hints the interviewer revealed. Never the guide.
"""

from django.contrib.auth.decorators import login_not_required
from django.db.models.fields.json import KT
from django.http import Http404, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_POST

from interviews import clock as clocks
from interviews import pad, selectors, services
from overlap import jobs
from runs import services as run_services
from runs.labels import verdict_label
from runs.selectors import run_view

GONE = 410


def _ended(request, session) -> HttpResponse:
    return HttpResponse("This interview has ended; nothing more can be changed.", status=GONE)


@login_not_required
def workspace(request, token):
    session = selectors.session_for_candidate(token)
    revision = services.latest_revision(session)
    runs = session.runs.all()[:1]
    context = {
        "session": session,
        "token": token,
        "title": session.exercise_version.title,
        "prompt": session.exercise_version.prompt,
        "code": session.pad_text,
        "revision_number": revision.number if revision else 0,
        "hints": selectors.candidate_hints(session),
        "interviewer_name": selectors.interviewer_display_name(session),
        "scheduled_label": selectors.scheduled_label(session),
        "last_run": run_view(runs[0]) if runs else None,
        "last_run_url": _run_url(token, runs[0].pk) if runs else "",
        "run_list": _run_list(session, token),
        "clock": clocks.clock_state(session),
    }
    return render(request, "candidate/workspace.html", context)


@login_not_required
def state(request, token):
    """Polled by the lobby and the live page: reload when the state moved on."""
    try:
        session = selectors.session_for_candidate(token)
    except Http404:
        if not getattr(request, "htmx", False):
            raise
        # A link renewed or expired while the lobby waits: stop waiting; the reload shows
        # the page that says why and what to do.
        return HttpResponse("", headers={"HX-Refresh": "true"})
    response = HttpResponse("")
    if request.GET.get("state") != session.state:
        response["HX-Refresh"] = "true"
    return response


@login_not_required
@require_POST
def save(request, token):
    session = selectors.session_for_candidate(token)
    if session.is_ended:
        return _ended(request, session)
    try:
        revision = services.code_save(session=session, code=request.POST.get("code", ""))
    except services.SessionError as exc:
        return HttpResponse(str(exc), status=409)
    return HttpResponse(f"Saved (revision {revision.number})",
                        headers={"X-Revision": str(revision.number)})


@login_not_required
@require_POST
def run(request, token):
    session = selectors.session_for_candidate(token)
    if session.is_ended:
        return _ended(request, session)
    try:
        if "code" in request.POST and "version" not in request.POST:
            services.code_save(session=session, code=request.POST["code"])  # form fallback
        # The server's authoritative text is graded, never what a browser claims it has.
        code = pad.pad_checkpoint(session).code
        created = run_services.run_create(session=session, code=code, requested_by="candidate")
    except (services.SessionError, run_services.RunRefused) as exc:
        return _refused(request, str(exc))
    except jobs.BrokerUnavailable as exc:
        return _refused(request, exc.message, status=503)
    return render(request, "runs/_run.html",
                  {"view": run_view(created), "poll_url": _run_url(token, created.pk)})


def _refused(request, message: str, status: int = 200):
    """A refused Run (one in progress, the per-minute limit, the broker away) is said next
    to the Run button; the results pane keeps the verdict it shows."""
    response = render(request, "candidate/workspace.html#refused", {"message": message},
                      status=status)
    if getattr(request, "htmx", False):
        response = HttpResponse(message, content_type="text/plain; charset=utf-8",
                                status=200)  # htmx swaps only 2xx answers
        response["HX-Retarget"] = "#run-refused"
        response["HX-Reswap"] = "textContent"
    return response


def _run_url(token: str, run_id: int) -> str:
    return reverse("candidate:run_status", args=[token, run_id])


@login_not_required
def run_status(request, token, run_id):
    found = selectors.run_for_candidate(token, run_id)  # recovery is Celery beat's job
    return render(request, "runs/_run.html",
                  {"view": run_view(found), "poll_url": _run_url(token, found.pk)})


@login_not_required
def hints(request, token):
    session = selectors.session_for_candidate(token)
    return render(request, "candidate/workspace.html#hints",
                  {"hints": selectors.candidate_hints(session), "session": session,
                   "token": token})


def _run_list(session, token: str, limit: int = 50) -> list[dict]:
    """The session's runs, newest first, each openable (its verdict partial): what the
    candidate sees of a run anyway, never more."""
    total = session.runs.count()
    rows = session.runs.defer("code", "result").annotate(
        speedup=KT("result__metrics__speedup")).order_by("-created_at")[:limit]
    return [{"id": run.pk, "number": total - i, "url": _run_url(token, run.pk),
             "into_session": clocks.offset_label(session, run.created_at),
             "label": verdict_label(run.verdict) or run.get_status_display(),
             "speedup": _number(run.speedup)}
            for i, run in enumerate(rows)]


def _number(text) -> float | None:
    try:
        return float(text) if text is not None else None
    except ValueError:
        return None


@login_not_required
def run_list(request, token):
    """The candidate's earlier runs (refreshed when a run's status changes)."""
    session = selectors.session_for_candidate(token)
    return render(request, "candidate/workspace.html#run-history",
                  {"run_list": _run_list(session, token), "token": token})


@login_not_required
def clock(request, token):
    """The time left, fetched again when the interviewer extends or pauses it."""
    session = selectors.session_for_candidate(token)
    return render(request, "candidate/workspace.html#clock",
                  {"clock": clocks.clock_state(session), "session": session, "token": token})
