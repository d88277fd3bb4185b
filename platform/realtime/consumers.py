"""The pad's WebSocket: one connection per open editor, candidate or interviewer.

Client → server (JSON):
  {"type": "push", "version": V, "updates": [{"clientID", "changes"}], "cursor": {…}}
  {"type": "pull", "version": V}
  {"type": "presence", "anchor": a, "head": h}
  {"type": "chat", "text": "…"}
  {"type": "signal", "kind": "paste"|"away"|"back", …}  (the candidate's only: integrity)
Server → client:
  {"type": "hello", "version", "doc", "updates", "you", "readonly", "state", "chat"}
  {"type": "updates", "version": V, "updates": […], "cursor"?, "pushed"?}  (V: the version
      they start from; "pushed": the sender's own, accepted; "cursor": the typist's)
  {"type": "pushed", "ok": false, "refused"?} · {"type": "refused", "message"}
  {"type": "presence", "peer", "name", "role", "anchor", "head"}
  {"type": "chat", "message"} · {"type": "state", …} · {"type": "hint", "number"}
  {"type": "run", "id", "status"}  (a run of the session was queued, started or finished)
  {"type": "clock"}  (the interviewer extended or paused the time: fetch the timer again)
  {"type": "joined"}  (someone opened the pad: send your presence, so they see you)
  {"type": "integrity", "id", "kind"}  (interviewers only: a paste or an absence)

The candidate's connection is opened with the session token; it receives only what the
candidate may see (the shared text, names, chat, state, the number of a revealed hint).
Interviewers need a staff login and see only their own sessions, as on the pages.
"""

import json
import time

from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings
from django.db import InterfaceError, OperationalError, connection
from django.http import Http404

from accounts.roles import is_staff_member
from interviews import integrity, pad, selectors, services
from interviews.models import InterviewSession, PadUpdate
from interviews.push import group_name

CLOSE_NOT_ALLOWED = 4403
CLOSE_GONE = 4410
CLOSE_TOO_MANY = 4429
CLOSE_UNAVAILABLE = 4503  # the database failed: nothing was stored, reconnect and resend
PULL_UPDATES_PER_TOKEN = 100
# Open sockets per client key (candidate link or interviewer + session), in this process.
_OPEN: dict[tuple, set[str]] = {}
PRESENCE_MIN_INTERVAL = 0.03
# Fields of a group event each side may receive (anything else is dropped).
CANDIDATE_EVENTS = {
    "updates": ("version", "updates", "cursor"),
    "presence": ("peer", "name", "role", "anchor", "head"),
    "chat": ("message",),
    "state": ("state", "phase", "readonly"),
    "readonly": (),
    "hint": ("number",),
    "revoked": (),
    "run": ("id", "status"),  # a run's status changed: the page fetches what it may see
    "clock": (),  # the time left changed (extended, paused): the page fetches its timer
    "joined": (),  # someone opened the pad: the others say where their cursors are
}
INTERVIEWER_EVENTS = {**CANDIDATE_EVENTS, "readonly": ("interviewer_readonly",),
                      "integrity": ("id", "kind")}
# Integrity signals from the candidate's browser, per connection (the database keeps a
# per-session limit too).
SIGNALS_PER_10S = 20


def _keystroke_db(fn):
    """Run `fn` in a worker thread that keeps its database connection between keystrokes.

    Not thread-sensitive: pushes to different sessions run in parallel (each session's
    row lock orders its own) instead of queueing behind one thread. Channels'
    database_sync_to_async would also check the connection before every call (a round
    trip per keystroke); here a connection found broken is replaced and the call retried
    once (the push is a transaction: it either happened or not).
    """
    def run(*args, **kwargs):
        try:
            try:
                return fn(*args, **kwargs)
            except (InterfaceError, OperationalError):
                connection.close()
                return fn(*args, **kwargs)
        finally:
            if getattr(connection, "pool", None) is not None:
                # Pooled (PostgreSQL under the ASGI server): the connection goes back after
                # each keystroke. Kept by this thread it would be one of the pool's few,
                # held for good by a thread that may never run again, and a connection
                # broken by an outage would wait here for its next keystroke.
                connection.close()

    return sync_to_async(run, thread_sensitive=False)


class PadConsumer(AsyncWebsocketConsumer):
    role = ""
    allowed = CANDIDATE_EVENTS

    async def __call__(self, scope, receive, send):
        try:
            await super().__call__(scope, receive, send)
        finally:
            # However the socket ended (a crash included), it no longer counts against
            # its client's few sockets: a leaked one would lock the client out for good.
            self._forget()

    async def websocket_connect(self, message):
        try:
            await super().websocket_connect(message)
        except (InterfaceError, OperationalError):
            await self._database_failed()

    async def websocket_receive(self, message):
        try:
            await super().websocket_receive(message)
        except (InterfaceError, OperationalError):
            await self._database_failed()

    async def _database_failed(self) -> None:
        """The database is down or refuses writes (a full disk): nothing of this message
        was stored. The socket is closed, so the page reconnects (within a second) and
        sends again what it still holds; this process's connection is replaced then
        (Channels closes an unusable one before its next query)."""
        self._forget()
        await self.close(code=CLOSE_UNAVAILABLE)

    def _forget(self) -> None:
        key = getattr(self, "client_key", None)
        if key is not None and key in _OPEN:
            _OPEN[key].discard(self.channel_name)
            if not _OPEN[key]:
                del _OPEN[key]

    async def connect(self):
        session = await self._load_session()
        if session is None:
            await self.close(code=CLOSE_NOT_ALLOWED)
            return
        self.session_id = session.pk
        self.client_key = self._client_key(session)
        open_here = _OPEN.setdefault(self.client_key, set())
        if len(open_here) >= settings.OVERLAP_PAD_SOCKETS_PER_CLIENT:
            # Every open tab costs presence messages and history reads for everyone in
            # the session: a few per person are plenty.
            await self.close(code=CLOSE_TOO_MANY)
            return
        open_here.add(self.channel_name)
        self.pull_tokens = float(settings.OVERLAP_PAD_PULL_BUDGET_PER_10S)
        self.pull_at = time.monotonic()
        self.author = await self._author(session)
        self.group = group_name(session.pk)
        self.last_presence = 0.0
        self.tokens, self.tokens_at = float(settings.OVERLAP_PAD_UPDATES_PER_10S), time.monotonic()
        self.signal_tokens, self.signal_at = float(SIGNALS_PER_10S), time.monotonic()
        self.closed = False
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()
        try:
            since = int(self.scope.get("query_string", b"").decode().partition("v=")[2] or -1)
        except ValueError:
            since = -1
        await self._send(await self._hello(since))
        # Whoever is already here says where they are (a cursor is otherwise only sent
        # when it moves): the newcomer sees at once who is in the pad.
        await self.channel_layer.group_send(self.group, {
            "type": "pad.event", "kind": "joined", "origin": self.channel_name, "data": {}})

    async def disconnect(self, code):
        self.closed = True
        self._forget()
        if getattr(self, "group", None):
            await self.channel_layer.group_discard(self.group, self.channel_name)
            await self.channel_layer.group_send(self.group, {
                "type": "pad.event", "kind": "presence", "origin": self.channel_name,
                "data": {"peer": self.channel_name[-12:], "name": self.author.name,
                         "role": self.author.role, "anchor": None, "head": None}})

    async def receive(self, text_data=None, bytes_data=None):
        raw = text_data or ""
        if len(raw) > settings.OVERLAP_PAD_MESSAGE_BYTES:
            await self._send({"type": "refused", "message": "That change is too large."})
            return
        try:
            message = json.loads(raw)
        except (ValueError, RecursionError):  # not JSON, or nested past the decoder's bound
            return
        if not isinstance(message, dict):
            return
        kind = message.get("type")
        if kind == "push":
            await self._push(message)
        elif kind == "pull":
            version = message.get("version")
            if isinstance(version, int) and version >= 0:
                await self._pull(version)
        elif kind == "presence":
            await self._presence(message)
        elif kind == "chat":
            await self._chat(message.get("text"))
        elif kind == "signal" and self.role == PadUpdate.CANDIDATE:
            await self._signal(message)

    def _cursor(self, message) -> dict | None:
        """A cursor sent along (validated), as the presence data others receive."""
        cursor = message.get("cursor") if message.get("type") == "push" else message
        if not isinstance(cursor, dict):
            return None
        anchor, head = cursor.get("anchor"), cursor.get("head")
        if not all(isinstance(v, int) and 0 <= v <= 1_000_000 for v in (anchor, head)):
            return None
        return {"peer": self.channel_name[-12:], "name": self.author.name,
                "role": self.author.role, "anchor": anchor, "head": head}

    def _client_key(self, session) -> tuple:
        return (self.role, session.pk)

    async def _pull(self, version: int) -> None:
        """The history since ``version``, priced by what it costs: 1 token, plus one per
        PULL_UPDATES_PER_TOKEN updates it returned (charged after, so a long pull leaves
        the budget in debt); refused while the budget is empty."""
        now = time.monotonic()
        budget = float(settings.OVERLAP_PAD_PULL_BUDGET_PER_10S)
        self.pull_tokens = min(budget, self.pull_tokens + (now - self.pull_at) * budget / 10)
        self.pull_at = now
        if self.pull_tokens < 1:
            await self._send({"type": "refused", "message":
                              "Too many requests for the pad's history; wait a few seconds."})
            return
        updates = await self._since(version)
        self.pull_tokens -= 1 + len(updates) / PULL_UPDATES_PER_TOKEN
        await self._send({"type": "updates", "version": version, "updates": updates,
                          "pulled": True})

    def _rate_ok(self, count: int) -> bool:
        """A token bucket per connection (the database keeps a per-session limit too)."""
        now = time.monotonic()
        per_second = settings.OVERLAP_PAD_UPDATES_PER_10S / 10
        self.tokens = min(settings.OVERLAP_PAD_UPDATES_PER_10S,
                          self.tokens + (now - self.tokens_at) * per_second)
        self.tokens_at = now
        if self.tokens < count:
            return False
        self.tokens -= count
        return True

    async def _push(self, message):
        version, updates = message.get("version"), message.get("updates")
        if not isinstance(version, int) or not isinstance(updates, list):
            return
        if self.role == PadUpdate.CANDIDATE and not self._rate_ok(len(updates)):
            await self._send({"type": "pushed", "ok": False, "refused":
                              "You are sending changes too fast; they are kept and will be "
                              "sent in a moment."})
            return
        try:
            result = await _keystroke_db(pad.pad_push)(
                session_id=self.session_id, version=version, updates=updates,
                author=self.author, check_rate=False)
        except pad.PadRefused as exc:
            await self._send({"type": "pushed", "ok": False, "refused": str(exc)})
            return
        if not result.accepted:
            await self._send({"type": "pushed", "ok": False})
            return
        data = {"version": result.version, "updates": result.updates}
        cursor = self._cursor(message)
        if cursor:
            data["cursor"] = cursor
        # The sender hears first (its confirmation), then everybody else, in one message
        # each (the typist's cursor rides along with the text).
        await self._send({"type": "updates", "pushed": True, **data})
        await self.channel_layer.group_send(self.group, {
            "type": "pad.event", "kind": "updates", "data": data, "origin": self.channel_name})

    async def _presence(self, message):
        now = time.monotonic()
        if now - self.last_presence < PRESENCE_MIN_INTERVAL:
            return
        cursor = self._cursor(message)
        if cursor is None:
            return
        self.last_presence = now
        await self.channel_layer.group_send(self.group, {
            "type": "pad.event", "kind": "presence", "origin": self.channel_name,
            "data": cursor})

    async def _signal(self, message):
        """A paste or an absence reported by the candidate's page (bounded, rate-limited;
        stored with the server's time). Refusals are silent: nothing for the candidate."""
        now = time.monotonic()
        self.signal_tokens = min(float(SIGNALS_PER_10S), self.signal_tokens
                                 + (now - self.signal_at) * SIGNALS_PER_10S / 10)
        self.signal_at = now
        if self.signal_tokens < 1:
            return
        self.signal_tokens -= 1
        fields = {key: message.get(key) for key in ("kind", "chars", "source", "reason")}
        try:
            await database_sync_to_async(integrity.signal_record)(
                session_id=self.session_id, message=fields)
        except integrity.SignalRefused:
            return

    async def _chat(self, text):
        if not isinstance(text, str):
            return
        try:
            await database_sync_to_async(self._chat_post)(text)
        except services.SessionError as exc:
            await self._send({"type": "refused", "message": str(exc)})

    def _chat_post(self, text):
        session = InterviewSession.objects.get(pk=self.session_id)
        services.chat_post(session=session, role=self.author.role, author=self.author.name,
                           text=text)

    async def pad_event(self, event):
        if event.get("origin") == self.channel_name:
            return
        kind = event["kind"]
        if kind not in self.allowed:
            return
        if kind == "revoked" and self.role == PadUpdate.CANDIDATE:
            await self._send({"type": "revoked"})
            await self.close(code=CLOSE_GONE)
            return
        data = event.get("data") or {}
        await self._send({"type": kind, **{key: data.get(key) for key in self.allowed[kind]
                                            if key in data}})

    async def _send(self, message: dict) -> None:
        if getattr(self, "closed", False):
            return
        try:
            await self.send(text_data=json.dumps(message, separators=(",", ":")))
        except (RuntimeError, OSError) as exc:
            # The browser went away while a group event was on its way, before its
            # disconnect reached us: the server refuses the send (uvicorn raises
            # RuntimeError "after sending 'websocket.close'", or ClientDisconnected, an
            # OSError). Nothing is lost — a reconnect says hello from its version.
            if isinstance(exc, RuntimeError) and "websocket.close" not in str(exc):
                raise
            self.closed = True

    @database_sync_to_async
    def _since(self, version: int) -> list[dict]:
        session = InterviewSession.objects.get(pk=self.session_id)
        return pad.pad_updates_since(session, version)

    @database_sync_to_async
    def _hello(self, since: int) -> dict:
        session = InterviewSession.objects.get(pk=self.session_id)
        version = since if 0 <= since <= session.pad_version else session.pad_version
        doc = session.pad_text if version == session.pad_version else \
            pad.pad_text_at(session, version)
        readonly = session.state != InterviewSession.LIVE or (
            self.role == PadUpdate.INTERVIEWER and session.interviewer_readonly)
        return {
            "type": "hello", "version": version, "doc": doc, "head": session.pad_version,
            "updates": pad.pad_updates_since(session, version),
            "you": {"role": self.author.role, "name": self.author.name,
                    "peer": self.channel_name[-12:]},
            "readonly": readonly, "state": session.state,
            "chat": [services.chat_json(m) for m in session.chat_messages.all()[:500]],
        }


class CandidatePadConsumer(PadConsumer):
    role = PadUpdate.CANDIDATE
    allowed = CANDIDATE_EVENTS

    @database_sync_to_async
    def _load_session(self):
        try:
            return selectors.session_for_candidate(self.scope["url_route"]["kwargs"]["token"])
        except Http404:
            return None

    @database_sync_to_async
    def _author(self, session):
        return pad.author_for_candidate(session)


class InterviewerPadConsumer(PadConsumer):
    role = PadUpdate.INTERVIEWER
    allowed = INTERVIEWER_EVENTS

    def _client_key(self, session) -> tuple:
        return (self.role, session.pk, self.scope["user"].pk)

    @database_sync_to_async
    def _load_session(self):
        user = self.scope.get("user")
        # WebSockets pass no Django middleware: the staff group check is made here too.
        if user is None or not user.is_authenticated or not is_staff_member(user):
            return None
        return selectors.sessions_visible_to(user) \
            .filter(pk=self.scope["url_route"]["kwargs"]["pk"]).first()

    @database_sync_to_async
    def _author(self, session):
        return pad.author_for_interviewer(self.scope["user"])
