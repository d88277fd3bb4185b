"""Reads for live interviews, including who may see what."""

from datetime import timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django.conf import settings
from django.db.models import QuerySet
from django.http import Http404
from django.shortcuts import get_object_or_404
from django.utils import timezone

from accounts.roles import is_author
from interviews.models import InterviewSession
from runs.models import Run


def sessions_visible_to(user) -> QuerySet[InterviewSession]:
    """Interviewers see their own sessions; authors and admins see all."""
    sessions = InterviewSession.objects.select_related("exercise_version", "interviewer")
    return sessions if is_author(user) else sessions.filter(interviewer=user)


def session_for_staff(user, pk: int) -> InterviewSession:
    return get_object_or_404(sessions_visible_to(user), pk=pk)


def session_for_candidate(token: str) -> InterviewSession:
    """The session behind a candidate link; a renewed (old) or expired link finds nothing."""
    if not token or len(token) > 64:
        raise Http404
    session = get_object_or_404(
        InterviewSession.objects.select_related("exercise_version", "interviewer"), token=token
    )
    if link_expired(session):
        raise Http404("This interview link has expired.")
    return session


def run_for_candidate(token: str, run_id: int) -> Run:
    """A run of the session behind a candidate link, for its status poll (every 500 ms
    while it runs): one query for the run and its session, without the run's code or the
    exercise version (its files, prompt and guide) that ``session_for_candidate`` loads."""
    if not token or len(token) > 64:
        raise Http404
    run = get_object_or_404(
        Run.objects.select_related("session").defer("code"), pk=run_id, session__token=token
    )
    if link_expired(run.session):
        raise Http404("This interview link has expired.")
    return run


def link_expired(session: InterviewSession, now=None) -> bool:
    if session.ended_at is None:
        return False
    lifetime = timedelta(hours=settings.OVERLAP_CANDIDATE_LINK_HOURS)
    return (now or timezone.now()) > session.ended_at + lifetime


def revealed_hint_indexes(session: InterviewSession) -> set[int]:
    return set(session.hint_reveals.values_list("index", flat=True))


def candidate_hints(session: InterviewSession) -> list[dict]:
    """Only what the candidate may see: the prompt text of revealed hints, in order."""
    hints = session.exercise_version.guide["hints"]
    return [
        {"number": i + 1, "prompt": hints[i]["prompt"]}
        for i in sorted(revealed_hint_indexes(session))
        if i < len(hints)
    ]


def scores_by_key(session: InterviewSession) -> dict[tuple[str, str], object]:
    return {(s.kind, s.key): s for s in session.scores.all()}


def interviewer_display_name(session: InterviewSession) -> str:
    """The name the candidate and the scorecard show: the display name, never the
    staff account's login name."""
    from interviews.pad import display_name

    return display_name(session.interviewer)


def scheduled_local(session: InterviewSession):
    """The planned start in the session's time zone (None when not planned)."""
    if session.scheduled_at is None:
        return None
    try:
        zone = ZoneInfo(session.time_zone)
    except (ZoneInfoNotFoundError, ValueError):
        zone = ZoneInfo("UTC")
    return session.scheduled_at.astimezone(zone)


def questions_matching(session: InterviewSession, query: str, limit: int = 20):
    """Q&A questions not yet in the session that match `query` (the banks' full-text
    search, qa/search.py), best first."""
    from qa.models import Question
    from qa.search import search

    found = Question.objects.filter(retired=False).select_related("bank") \
        .exclude(pk__in=session.bank_questions.values("question")) \
        .order_by("bank__title", "kind", "position")
    return list(search(found, query)[:limit])


def scheduled_label(session: InterviewSession) -> str:
    """"Tuesday 1 December 2026, 15:30 (Europe/Berlin)", or "" when not planned."""
    local = scheduled_local(session)
    if local is None:
        return ""
    return f"{local:%A} {local.day} {local:%B %Y, %H:%M} ({session.time_zone})"
