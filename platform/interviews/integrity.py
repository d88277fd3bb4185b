"""Integrity signals: pastes into the candidate's editor and the candidate leaving the page.

The candidate's browser reports them over its pad socket; everything it sends is bounded
and checked here, and only the kind, a paste's length and where its text came from are
taken from it. Order and times are the server's own (a paste is dated when it arrives; an
absence lasts from the "away" message to the "back" one), so a browser cannot reorder or
shorten anything. The interviewer's console hears of each one at once; playback and the
scorecard list them. The candidate is told up front that they are recorded.
"""

from datetime import timedelta

from django.db import transaction
from django.utils import timezone

from interviews.clock import offset_label
from interviews.models import IntegrityEvent, InterviewSession
from interviews.push import broadcast

MAX_EVENTS_PER_SESSION = 1000
MAX_EVENTS_PER_MINUTE = 60
MAX_PASTE_CHARS = 10_000_000
FRESH_SECONDS = 8  # the console highlights what happened this recently


class SignalRefused(Exception):
    """The signal was not stored (bad message, session not live, too many)."""


def _int(value, upper: int) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return min(value, upper)


def signal_record(*, session_id: int, message: dict) -> IntegrityEvent:
    """Store one signal from the candidate's browser: {"kind": "paste", "chars", "source"},
    {"kind": "away", "reason"} or {"kind": "back"} (closes the open absence)."""
    if not isinstance(message, dict):
        raise SignalRefused("Bad signal.")
    kind = message.get("kind")
    if kind not in ("paste", "away", "back"):
        raise SignalRefused("Unknown signal.")
    with transaction.atomic():
        session = InterviewSession.objects.select_for_update().only("state").get(pk=session_id)
        if session.state != InterviewSession.LIVE:
            raise SignalRefused("The interview is not live.")
        now = timezone.now()
        events = IntegrityEvent.objects.filter(session_id=session_id)
        open_away = events.filter(kind=IntegrityEvent.AWAY, returned_at__isnull=True) \
            .order_by("-created_at").first()
        if kind == "back":
            if open_away is None:
                raise SignalRefused("Not away.")
            open_away.returned_at = now
            open_away.save(update_fields=["returned_at"])
            event = open_away
        else:
            if events.filter(created_at__gte=now - timedelta(minutes=1)).count() \
                    >= MAX_EVENTS_PER_MINUTE or events.count() >= MAX_EVENTS_PER_SESSION:
                raise SignalRefused("Too many signals.")
            if kind == "away":
                reason = message.get("reason")
                reason = reason if reason in (IntegrityEvent.BLUR, IntegrityEvent.HIDDEN) \
                    else IntegrityEvent.BLUR
                if open_away is not None:  # one absence at a time; a hidden tab says more
                    if reason == IntegrityEvent.HIDDEN and open_away.reason != reason:
                        open_away.reason = reason
                        open_away.save(update_fields=["reason"])
                    event = open_away
                else:
                    event = IntegrityEvent.objects.create(
                        session_id=session_id, kind=IntegrityEvent.AWAY, reason=reason)
            else:
                chars = _int(message.get("chars"), MAX_PASTE_CHARS)
                if chars is None:
                    raise SignalRefused("Bad paste size.")
                source = message.get("source")
                if source not in (IntegrityEvent.PAD, IntegrityEvent.TASK):
                    source = IntegrityEvent.OUTSIDE
                event = IntegrityEvent.objects.create(
                    session_id=session_id, kind=IntegrityEvent.PASTE, chars=chars,
                    source=source)
    # Interviewers only: the candidate's consumer does not forward "integrity" events.
    broadcast(session_id, "integrity", {"id": event.pk, "kind": event.kind})
    return event


def _duration(seconds: float) -> str:
    if seconds < 1:
        return "less than 1 s"
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds} s"
    return f"{seconds // 60} min {seconds % 60:02d} s"


def signal_label(event: IntegrityEvent, *, ended: bool = False) -> str:
    """One line for the console, the scorecard and its exports."""
    if event.kind == IntegrityEvent.PASTE:
        return f"Pasted {event.chars:,} characters {event.get_source_display()}"
    reason = event.get_reason_display() if event.reason else ""
    if event.returned_at is None:
        still = "had not come back when the interview ended" if ended else "not back yet"
        return f"Left the page ({reason}); {still}" if reason else f"Left the page; {still}"
    return f"Left the page for {_duration(event.away_seconds)} ({reason})"


def signal_rows(session: InterviewSession) -> list[dict]:
    """Every signal of the session in server order, as the pages and exports show them."""
    ended = session.state == InterviewSession.ENDED
    recent = timezone.now() - timedelta(seconds=FRESH_SECONDS)
    return [{"id": e.pk, "kind": e.kind, "label": signal_label(e, ended=ended),
             "fresh": max(e.created_at, e.returned_at or e.created_at) >= recent,
             "flag": e.is_external or e.kind == IntegrityEvent.AWAY,
             "chars": e.chars, "source": e.source, "reason": e.reason,
             "away_seconds": e.away_seconds, "at": e.created_at,
             "into_session": offset_label(session, e.created_at)}
            for e in session.integrity_events.all()]


def signal_summary(rows: list[dict]) -> dict:
    pastes = [r for r in rows if r["kind"] == IntegrityEvent.PASTE]
    away = [r for r in rows if r["kind"] == IntegrityEvent.AWAY]
    return {
        "pastes": len(pastes),
        "outside_pastes": sum(1 for r in pastes if r["source"] != IntegrityEvent.PAD),
        "outside_chars": sum(r["chars"] or 0 for r in pastes
                             if r["source"] != IntegrityEvent.PAD),
        "away": len(away),
        "away_seconds": round(sum(r["away_seconds"] or 0 for r in away)),
    }
