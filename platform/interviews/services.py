"""Writes for live interviews. Views call these; they check state, never the templates."""

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from interviews.models import CodeRevision, HintReveal, InterviewSession, Score, SessionQuestion

PHASES = [key for key, _ in InterviewSession.PHASES]
QUESTION_SCORES = (1, 2, 3, 4)


class SessionError(Exception):
    """A request that the session's state or content does not allow; the message says why."""


def starter_code(version) -> str:
    return version.files.get("starter.py", "")


@transaction.atomic
def session_create(*, interviewer, exercise, candidate_name: str, candidate_email: str,
                   questions=()) -> InterviewSession:
    if exercise.current_version_id is None:
        raise SessionError("This exercise has no version to run yet.")
    session = InterviewSession.objects.create(
        exercise_version_id=exercise.current_version_id,  # pinned: later edits don't move it
        interviewer=interviewer,
        candidate_name=candidate_name,
        candidate_email=candidate_email,
    )
    SessionQuestion.objects.bulk_create(
        SessionQuestion(session=session, question=q, position=i) for i, q in enumerate(questions)
    )
    CodeRevision.objects.create(session=session, number=1,
                                code=starter_code(session.exercise_version))
    return session


def session_start(*, session: InterviewSession) -> None:
    now = timezone.now()
    updated = InterviewSession.objects.filter(pk=session.pk, state=InterviewSession.SCHEDULED) \
        .update(state=InterviewSession.LIVE, started_at=now, phase="introduction",
                phase_started_at=now)
    if not updated:
        raise SessionError("Only a scheduled session can be started.")


def session_set_phase(*, session: InterviewSession, phase: str) -> None:
    if phase not in PHASES:
        raise SessionError(f"Unknown phase {phase!r}.")
    if not session.is_live:
        raise SessionError("The session is not live.")
    InterviewSession.objects.filter(pk=session.pk).update(phase=phase,
                                                          phase_started_at=timezone.now())


def session_end(*, session: InterviewSession) -> None:
    updated = InterviewSession.objects.filter(pk=session.pk, state=InterviewSession.LIVE) \
        .update(state=InterviewSession.ENDED, ended_at=timezone.now())
    if not updated:
        raise SessionError("Only a live session can be ended.")


def latest_revision(session: InterviewSession) -> CodeRevision | None:
    return session.revisions.order_by("-number").first()


@transaction.atomic
def code_save(*, session: InterviewSession, code: str) -> CodeRevision:
    """Keep every distinct saved state; saving the same code twice stores it once."""
    locked = InterviewSession.objects.select_for_update().get(pk=session.pk)
    if not locked.is_live:
        raise SessionError("The session is not live; the code can't change now.")
    if len(code.encode()) > settings.OVERLAP_MAX_CODE_BYTES:
        raise SessionError(
            f"The code is larger than {settings.OVERLAP_MAX_CODE_BYTES // 1024} KiB and was "
            "not saved."
        )
    latest = latest_revision(locked)
    if latest is not None and latest.code == code:
        return latest
    number = latest.number + 1 if latest else 1
    return CodeRevision.objects.create(session=locked, number=number, code=code)


def hint_reveal(*, session: InterviewSession, index: int, by) -> HintReveal:
    hints = session.exercise_version.guide["hints"]
    if not 0 <= index < len(hints):
        raise SessionError("No such hint.")
    if session.is_ended:
        raise SessionError("The session has ended.")
    reveal, _ = HintReveal.objects.get_or_create(session=session, index=index,
                                                 defaults={"revealed_by": by})
    return reveal


def _allowed_scores(session: InterviewSession, kind: str, key: str) -> tuple[int, ...]:
    guide = session.exercise_version.guide
    if kind == Score.RUBRIC:
        for criterion in guide["rubric"]:
            if criterion["key"] == key:
                return tuple(level["score"] for level in criterion["levels"])
        raise SessionError(f"No rubric criterion {key!r}.")
    if kind == Score.FOLLOWUP:
        if not key.isdigit() or int(key) >= len(guide["followups"]["questions"]):
            raise SessionError("No such follow-up question.")
        return QUESTION_SCORES
    if kind == Score.QUESTION:
        if not key.isdigit() or not session.bank_questions.filter(question_id=int(key)).exists():
            raise SessionError("That question is not part of this session.")
        return QUESTION_SCORES
    raise SessionError(f"Unknown score kind {kind!r}.")


def score_set(*, session: InterviewSession, kind: str, key: str, score: int | None,
              note: str | None = None) -> Score:
    allowed = _allowed_scores(session, kind, key)
    if score is not None and score not in allowed:
        raise SessionError(f"Score {score} is not one of {', '.join(map(str, allowed))}.")
    entry, _ = Score.objects.get_or_create(session=session, kind=kind, key=key)
    entry.score = score
    if note is not None:
        entry.note = note
    entry.save()
    return entry


def notes_set(*, session: InterviewSession, notes: str) -> None:
    InterviewSession.objects.filter(pk=session.pk).update(notes=notes)


def recommendation_set(*, session: InterviewSession, recommendation: str) -> None:
    allowed = {key for key, _ in InterviewSession.RECOMMENDATIONS} | {""}
    if recommendation not in allowed:
        raise SessionError("Unknown recommendation.")
    InterviewSession.objects.filter(pk=session.pk).update(recommendation=recommendation)
