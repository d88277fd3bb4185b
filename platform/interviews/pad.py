"""The shared pad: one document per session, the server is its authority.

Clients (CodeMirror 6 with @codemirror/collab) send the changes they made on top of the
version they last saw. The server accepts them only when that version is the current one
(a client that is behind first receives what it missed and rebases its own changes), so
there is one ordered list of updates and one authoritative text, which is what runs
grade. Every accepted update is stored with who made it and when (the playback).

Bounds (untrusted input): the document size, the updates per message, an update rate
and a per-session storage quota for the candidate's updates and saves.
"""

from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from interviews.changesets import (
    UNSTORABLE,
    BadChanges,
    UnstorableText,
    apply_changes,
    replace_changes,
)
from interviews.models import CodeRevision, InterviewSession, PadUpdate

MAX_UPDATES_PER_PUSH = 200
MAX_CLIENT_ID = 40
CHECKPOINT_EVERY = 25  # a CodeRevision every this many updates while typing (and on run/end)


class PadRefused(Exception):
    """The change was not accepted; the message is for the person typing."""


@dataclass(frozen=True)
class Author:
    role: str  # PadUpdate.CANDIDATE or PadUpdate.INTERVIEWER
    name: str


@dataclass
class PushResult:
    accepted: bool
    version: int  # the pad version before the accepted updates (or the current one)
    updates: list[dict]


def author_for_candidate(session: InterviewSession) -> Author:
    return Author(PadUpdate.CANDIDATE, session.candidate_name)


def author_for_interviewer(user) -> Author:
    """What the candidate sees of the interviewer (pad cursors, chat): the display name,
    never the login name, which is the staff account's and not the candidate's business."""
    return Author(PadUpdate.INTERVIEWER, display_name(user))


def display_name(user) -> str:
    return user.get_full_name().strip() or "Interviewer"


def update_json(update: PadUpdate) -> dict:
    """What a client receives for one update: candidate-safe (text and who typed it)."""
    return {"clientID": update.client_id, "changes": update.changes,
            "role": update.role, "author": update.author}


def _writable(session: InterviewSession, author: Author) -> None:
    if session.state == InterviewSession.ENDED:
        raise PadRefused("The interview has ended; the pad is read-only.")
    if session.state != InterviewSession.LIVE:
        raise PadRefused("The interview has not started yet.")
    if author.role == PadUpdate.INTERVIEWER and session.interviewer_readonly:
        raise PadRefused("The pad is read-only for interviewers in this session.")


def _limit(session: InterviewSession, author: Author, incoming_bytes: int, count: int,
           check_rate: bool) -> None:
    """Rate and quota for the candidate (interviewers are trusted staff). Whole-text
    saves go through pad_push too, so they count against the same limits. The socket
    checks the rate itself, per connection, without a query per keystroke."""
    if author.role != PadUpdate.CANDIDATE:
        return
    now = timezone.now()
    recent = PadUpdate.objects.filter(
        session=session, role=PadUpdate.CANDIDATE,
        created_at__gte=now - timedelta(seconds=10)).count() if check_rate else 0
    if recent + count > settings.OVERLAP_PAD_UPDATES_PER_10S:
        raise PadRefused("You are sending changes too fast; they are kept and will be "
                         "sent in a moment.")
    if session.pad_candidate_bytes + incoming_bytes > settings.OVERLAP_PAD_QUOTA_BYTES:
        raise PadRefused("This session has reached its storage limit for edits; please "
                         "ask your interviewer.")


def _checkpoint(session: InterviewSession, text: str, *, force: bool = False) -> None:
    """Keep CodeRevisions (the run history's code, the scorecard) in step with the pad."""
    if not force and session.pad_version % CHECKPOINT_EVERY:
        return
    latest = session.revisions.order_by("-number").first()
    if latest is not None and latest.code == text:
        return
    number = latest.number + 1 if latest else 1
    CodeRevision.objects.create(session=session, number=number, code=text)


def pad_push(*, session_id: int, version: int, updates, author: Author,
             check_rate: bool = True) -> PushResult:
    """Apply `updates` made on top of `version`, or refuse them when the client is behind."""
    if not isinstance(updates, list) or not 0 < len(updates) <= MAX_UPDATES_PER_PUSH:
        raise PadRefused("Bad update message.")
    with transaction.atomic():
        session = InterviewSession.objects.select_for_update().only(
            "state", "interviewer_readonly", "pad_text", "pad_version", "pad_candidate_bytes",
        ).get(pk=session_id)
        _writable(session, author)
        if version != session.pad_version:
            return PushResult(False, session.pad_version, [])
        text = session.pad_text
        now = timezone.now()
        rows = []
        for i, update in enumerate(updates):
            if not isinstance(update, dict):
                raise PadRefused("Bad update message.")
            client_id = update.get("clientID")
            if not isinstance(client_id, str) or not 0 < len(client_id) <= MAX_CLIENT_ID \
                    or UNSTORABLE.search(client_id):
                raise PadRefused("Bad update message.")
            try:
                text = apply_changes(text, update.get("changes"))
            except UnstorableText as exc:
                raise PadRefused(f"The change was not applied: {exc}.") from exc
            except BadChanges as exc:
                raise PadRefused(f"The change does not fit the document ({exc}).") from exc
            if len(text.encode()) > settings.OVERLAP_MAX_CODE_BYTES:
                raise PadRefused(f"The code would be larger than "
                                 f"{settings.OVERLAP_MAX_CODE_BYTES // 1024} KiB.")
            rows.append(PadUpdate(
                session=session, version=version + i + 1, client_id=client_id,
                role=author.role, author=author.name[:200], changes=update["changes"],
                size=len(client_id) + len(str(update["changes"])), created_at=now))
        _limit(session, author, sum(row.size for row in rows), len(rows), check_rate)
        PadUpdate.objects.bulk_create(rows)
        session.pad_text = text
        session.pad_version = version + len(rows)
        if author.role == PadUpdate.CANDIDATE:
            session.pad_candidate_bytes += sum(row.size for row in rows)
        session.save(update_fields=["pad_text", "pad_version", "pad_candidate_bytes"])
        if version // CHECKPOINT_EVERY != session.pad_version // CHECKPOINT_EVERY:
            _checkpoint(session, text, force=True)
    return PushResult(True, version, [update_json(row) for row in rows])


def pad_replace(*, session_id: int, text: str, author: Author, client_id: str = "save") \
        -> PushResult:
    """A whole-text save (the form fallback, old clients): stored as one minimal change."""
    text = text.replace("\r\n", "\n")
    for _attempt in range(5):
        session = InterviewSession.objects.get(pk=session_id)
        if session.pad_text == text:
            _writable(session, author)
            return PushResult(True, session.pad_version, [])
        changes = replace_changes(session.pad_text, text)
        result = pad_push(session_id=session_id, version=session.pad_version,
                          updates=[{"clientID": client_id, "changes": changes}], author=author)
        if result.accepted:
            return result
    raise PadRefused("The pad is busy; try again.")


def pad_updates_since(session: InterviewSession, version: int, limit: int = 5000) -> list[dict]:
    rows = session.pad_updates.filter(version__gt=version).order_by("version")[:limit]
    return [update_json(row) for row in rows]


def pad_text_at(session: InterviewSession, version: int) -> str:
    """The document as it was at `version` (rebuilt from the base and the updates)."""
    text = session.pad_base
    for changes in session.pad_updates.filter(version__lte=version).order_by("version") \
            .values_list("changes", flat=True).iterator():
        text = apply_changes(text, changes)
    return text


def pad_checkpoint(session: InterviewSession) -> CodeRevision | None:
    """Save the authoritative text as a revision now (before a run, at the end)."""
    with transaction.atomic():
        locked = InterviewSession.objects.select_for_update().get(pk=session.pk)
        _checkpoint(locked, locked.pad_text, force=True)
    return session.revisions.order_by("-number").first()
