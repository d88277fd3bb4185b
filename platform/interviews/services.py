"""Writes for live interviews. Views call these; they check state, never the templates."""

from datetime import UTC, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from interviews import pad
from interviews.changesets import UNSTORABLE
from interviews.models import (
    ChatMessage,
    CodeRevision,
    HintReveal,
    InterviewSession,
    PadUpdate,
    Score,
    SessionQuestion,
    new_token,
)
from interviews.push import broadcast

MAX_CHAT_CHARS = 2000
MAX_CHAT_PER_10S = 10

PHASES = [key for key, _ in InterviewSession.PHASES]
QUESTION_SCORES = (1, 2, 3, 4)


class SessionError(Exception):
    """A request that the session's state or content does not allow; the message says why."""


def starter_code(version) -> str:
    return version.files.get("starter.py", "").replace("\r\n", "\n")


@transaction.atomic
def session_create(*, interviewer, exercise, candidate_name: str, candidate_email: str,
                   questions=(), scheduled_at=None, time_zone: str = "UTC") -> InterviewSession:
    if exercise.current_version_id is None:
        raise SessionError("This exercise has no version to run yet.")
    session = InterviewSession.objects.create(
        exercise_version_id=exercise.current_version_id,  # pinned: later edits don't move it
        interviewer=interviewer,
        candidate_name=candidate_name,
        candidate_email=candidate_email,
        pad_base=starter_code(exercise.current_version),
        pad_text=starter_code(exercise.current_version),
        scheduled_at=scheduled_at,
        time_zone=time_zone,
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
    broadcast(session.pk, "state", {"state": InterviewSession.LIVE})


def session_set_phase(*, session: InterviewSession, phase: str) -> None:
    if phase not in PHASES:
        raise SessionError(f"Unknown phase {phase!r}.")
    if not session.is_live:
        raise SessionError("The session is not live.")
    if session.phase == phase:
        return
    InterviewSession.objects.filter(pk=session.pk).update(phase=phase,
                                                          phase_started_at=timezone.now())
    broadcast(session.pk, "state", {"state": session.state, "phase": phase})


def session_end(*, session: InterviewSession) -> None:
    updated = InterviewSession.objects.filter(pk=session.pk, state=InterviewSession.LIVE) \
        .update(state=InterviewSession.ENDED, ended_at=timezone.now())
    if not updated:
        raise SessionError("Only a live session can be ended.")
    pad.pad_checkpoint(session)
    from runs.services import runs_settle_at_end

    runs_settle_at_end(session=session)
    broadcast(session.pk, "state", {"state": InterviewSession.ENDED, "readonly": True})


def latest_revision(session: InterviewSession) -> CodeRevision | None:
    return session.revisions.order_by("-number").first()


def code_save(*, session: InterviewSession, code: str) -> CodeRevision:
    """A whole-text save from the candidate, applied to the shared pad as one change.

    Saving the same code twice stores it once. The result is checkpointed as a revision
    at once, so an acknowledged save is never lost.
    """
    try:
        result = pad.pad_replace(session_id=session.pk, text=code,
                                 author=pad.author_for_candidate(session))
    except pad.PadRefused as exc:
        raise SessionError(str(exc)) from exc
    if result.updates:
        broadcast(session.pk, "updates", {"version": result.version,
                                          "updates": result.updates})
    return pad.pad_checkpoint(session)


def hint_reveal(*, session: InterviewSession, index: int, by,
                out_of_order: bool = False) -> HintReveal:
    hints = session.exercise_version.guide["hints"]
    if not 0 <= index < len(hints):
        raise SessionError("No such hint.")
    if session.is_ended:
        raise SessionError("The session has ended.")
    revealed = set(session.hint_reveals.values_list("index", flat=True))
    if index in revealed:
        return session.hint_reveals.get(index=index)
    earlier = [i for i in range(index) if i not in revealed]
    if earlier and not out_of_order:
        raise SessionError(f"Hint {earlier[0] + 1} has not been revealed yet; reveal hints "
                           "in order (or confirm revealing this one out of order).")
    reveal, created = HintReveal.objects.get_or_create(session=session, index=index,
                                                       defaults={"revealed_by": by})
    if created:
        # Only the number: the candidate's page fetches the candidate-safe hint text.
        broadcast(session.pk, "hint", {"number": index + 1})
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


def readonly_set(*, session: InterviewSession, readonly: bool) -> None:
    """The interviewer watches without typing (per session), or types along."""
    InterviewSession.objects.filter(pk=session.pk).update(interviewer_readonly=readonly)
    broadcast(session.pk, "readonly", {"interviewer_readonly": readonly})


def chat_post(*, session: InterviewSession, role: str, author: str, text: str) -> ChatMessage:
    text = (text or "").strip()
    if not text:
        raise SessionError("An empty message was not sent.")
    if len(text) > MAX_CHAT_CHARS:
        raise SessionError(f"Messages are limited to {MAX_CHAT_CHARS} characters.")
    if UNSTORABLE.search(text):
        raise SessionError("The message holds a NUL character or half of a surrogate pair, "
                           "which cannot be stored; it was not sent.")
    if role not in (PadUpdate.CANDIDATE, PadUpdate.INTERVIEWER):
        raise SessionError("Unknown sender.")
    if session.is_ended:
        raise SessionError("The interview has ended.")
    recent = session.chat_messages.filter(
        role=role, created_at__gte=timezone.now() - timedelta(seconds=10)).count()
    if recent >= MAX_CHAT_PER_10S:
        raise SessionError("You are sending messages too fast; wait a few seconds.")
    message = ChatMessage.objects.create(session=session, role=role, author=author[:200],
                                         text=text)
    broadcast(session.pk, "chat", {"message": chat_json(message)})
    return message


def chat_json(message: ChatMessage) -> dict:
    return {"id": message.pk, "role": message.role, "author": message.author,
            "text": message.text, "at": message.created_at.isoformat(timespec="seconds")}


def token_renew(*, session: InterviewSession) -> str:
    """A new candidate link; the old one stops working at once."""
    token = new_token()
    InterviewSession.objects.filter(pk=session.pk).update(token=token)
    broadcast(session.pk, "revoked", {})
    return token


def question_add(*, session: InterviewSession, question) -> SessionQuestion:
    """A Q&A question picked during (or before) the session, asked after the others."""
    if session.is_ended:
        raise SessionError("The session has ended.")
    if question.retired:
        raise SessionError("That question is retired.")
    last = session.bank_questions.order_by("-position").first()
    entry, _ = SessionQuestion.objects.get_or_create(
        session=session, question=question,
        defaults={"position": last.position + 1 if last else 0})
    return entry


def invitation_send(*, session: InterviewSession, link: str) -> None:
    """The candidate's invitation through Django's e-mail framework (console in dev)."""
    from django.core.mail import send_mail

    from interviews.selectors import interviewer_display_name, scheduled_local

    if session.is_ended:
        raise SessionError("The session has ended; there is nothing to invite to.")
    version = session.exercise_version
    when = scheduled_local(session)
    lines = [
        f"Hello {session.candidate_name},",
        "",
        f"{interviewer_display_name(session)} invites you to a live coding interview: "
        f"{version.title} ({version.time_minutes} minutes of coding).",
        "",
    ]
    if when is not None:
        utc = session.scheduled_at.astimezone(UTC)
        lines += [f"When: {when:%A %d %B %Y, %H:%M} ({session.time_zone}; "
                  f"{utc:%H:%M} UTC)", ""]
    lines += [
        "Open this link at that time (no account is needed; keep it private):",
        link,
        "",
        "You will write Python in a shared editor: your interviewer sees your code as you "
        "type and can chat with you. Until the interviewer starts, the link shows a waiting "
        "room.",
    ]
    try:
        send_mail(f"Your interview: {version.title}", "\n".join(lines),
                  settings.DEFAULT_FROM_EMAIL, [session.candidate_email])
    except OSError as exc:
        raise SessionError(f"The e-mail could not be sent ({exc}).") from exc
    InterviewSession.objects.filter(pk=session.pk).update(invited_at=timezone.now())
