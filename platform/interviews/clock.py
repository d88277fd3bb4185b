"""The session's clock: the time left of the exercise's allocation, the same for the
candidate and the interviewer, which the interviewer can extend or pause.

Both pages count down from what the server renders (`clock_state`); every change is
pushed ("clock", no data) and the pages fetch the timer again, so they never drift apart
by more than a round trip. Paused time does not count.
"""

from datetime import timedelta

from django.db import transaction
from django.utils import timezone

from interviews.models import InterviewSession
from interviews.push import broadcast

MAX_EXTRA_SECONDS = 4 * 3600
STEP_MINUTES_LIMIT = 60


class ClockError(Exception):
    """The change is not allowed; the message says why."""


def allocation_seconds(session: InterviewSession) -> int:
    return session.exercise_version.time_minutes * 60


def clock_state(session: InterviewSession, now=None) -> dict:
    """What a timer needs: `since` (the start, moved later by paused time), `until` (the
    moment the clock stopped: paused or ended; None while it runs), `budget` (seconds
    allocated, extra time included) and `left` (seconds left at `now`, negative over)."""
    now = now or timezone.now()
    budget = allocation_seconds(session) + session.time_extra_seconds
    if session.started_at is None:
        return {"started": False, "since": None, "until": None, "budget": budget,
                "left": budget, "paused": False, "extra": session.time_extra_seconds,
                "now": now}
    since = session.started_at + timedelta(seconds=session.time_paused_seconds)
    stops = [moment for moment in (session.time_paused_at, session.ended_at) if moment]
    until = min(stops) if stops else None
    left = budget - ((until or now) - since).total_seconds()
    return {"started": True, "since": since, "until": until, "budget": budget,
            "left": left, "paused": session.time_paused_at is not None,
            "extra": session.time_extra_seconds, "now": now, "label": clock_label(left)}


def clock_label(left: float) -> str:
    """As the page's timer writes it: "12:30 left", or "+01:05 over"."""
    seconds = int(abs(left))
    text = f"{seconds // 60:02d}:{seconds % 60:02d}"
    return f"{text} left" if left >= 0 else f"+{text} over"


def offset_label(session: InterviewSession, moment) -> str:
    """mm:ss from the session's start (what the scorecard and the run list show)."""
    if not (session.started_at and moment):
        return ""
    seconds = max(0, int((moment - session.started_at).total_seconds()))
    return f"{seconds // 60:02d}:{seconds % 60:02d}"


def _locked_live(session_id: int) -> InterviewSession:
    session = InterviewSession.objects.select_for_update().get(pk=session_id)
    if session.state != InterviewSession.LIVE:
        raise ClockError("The clock runs only while the session is live.")
    return session


def clock_add(*, session: InterviewSession, minutes: int) -> None:
    """Give the candidate more time (or take some back, with a negative number)."""
    if not isinstance(minutes, int) or not 0 < abs(minutes) <= STEP_MINUTES_LIMIT:
        raise ClockError(f"Add between 1 and {STEP_MINUTES_LIMIT} minutes at a time.")
    with transaction.atomic():
        locked = _locked_live(session.pk)
        extra = locked.time_extra_seconds + minutes * 60
        if extra > MAX_EXTRA_SECONDS:
            raise ClockError("That is more than 4 hours of extra time.")
        if allocation_seconds(locked) + extra < 60:
            raise ClockError("The allocation cannot go below one minute.")
        locked.time_extra_seconds = extra
        locked.save(update_fields=["time_extra_seconds"])
    broadcast(session.pk, "clock", {})


def clock_pause(*, session: InterviewSession, paused: bool) -> None:
    """Stop the candidate's clock (paused time does not count) or start it again."""
    with transaction.atomic():
        locked = _locked_live(session.pk)
        now = timezone.now()
        if paused and locked.time_paused_at is None:
            locked.time_paused_at = now
        elif not paused and locked.time_paused_at is not None:
            locked.time_paused_seconds += max(0, int((now - locked.time_paused_at)
                                                     .total_seconds()))
            locked.time_paused_at = None
        else:
            return
        locked.save(update_fields=["time_paused_at", "time_paused_seconds"])
    broadcast(session.pk, "clock", {})
