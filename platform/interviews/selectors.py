"""Reads for live interviews, including who may see what."""

from django.db.models import QuerySet
from django.http import Http404
from django.shortcuts import get_object_or_404

from accounts.roles import is_author
from interviews.models import InterviewSession


def sessions_visible_to(user) -> QuerySet[InterviewSession]:
    """Interviewers see their own sessions; authors and admins see all."""
    sessions = InterviewSession.objects.select_related("exercise_version", "interviewer")
    return sessions if is_author(user) else sessions.filter(interviewer=user)


def session_for_staff(user, pk: int) -> InterviewSession:
    return get_object_or_404(sessions_visible_to(user), pk=pk)


def session_for_candidate(token: str) -> InterviewSession:
    if not token or len(token) > 64:
        raise Http404
    return get_object_or_404(
        InterviewSession.objects.select_related("exercise_version"), token=token
    )


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
