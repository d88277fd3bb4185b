"""Tools for the outage tests: a TCP proxy in front of PostgreSQL that a test cuts and
restores (the shared server cannot be stopped; cut, the proxy refuses new connections and
drops the open ones, as a stopped server does), the web server as `runstack` starts it,
and a pad client that types through its socket and reconnects as the page does."""

import contextlib
import json
import socket
import sys
import threading
import time
import urllib.error
import urllib.parse

from ops.bench_live import Browser
from tests.faults.harness import Stack, free_port, port_open, wait_for

# The page's reconnect back-off (pad.js): 500 ms, doubling, at most this.
RECONNECT_CAP_S = 1.0


class PgProxy:
    def __init__(self, host: str, port: int):
        self.target = (host, port)
        self.port = free_port()
        self.listener: socket.socket | None = None
        self.pairs: set[socket.socket] = set()
        self.lock = threading.Lock()

    def url_for(self, url: str) -> str:
        parsed = urllib.parse.urlparse(url)
        netloc = parsed.netloc.rsplit("@", 1)
        auth = netloc[0] + "@" if len(netloc) == 2 else ""
        return parsed._replace(netloc=f"{auth}127.0.0.1:{self.port}").geturl()

    def start(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        listener.settimeout(0.1)
        self.listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def _accept(self, listener: socket.socket) -> None:
        while self.listener is listener:
            try:
                client, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            client.settimeout(None)
            upstream.settimeout(None)
            with self.lock:
                self.pairs.update((client, upstream))
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        for sock in (src, dst):
            self._drop(sock)

    def _drop(self, sock: socket.socket) -> None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            sock.close()
        with self.lock:
            self.pairs.discard(sock)

    def cut(self) -> None:
        """The database is gone: connections refused, open ones dropped."""
        listener, self.listener = self.listener, None
        if listener is not None:
            listener.close()
        with self.lock:
            pairs = list(self.pairs)
        for sock in pairs:
            self._drop(sock)
        assert wait_for(lambda: not port_open(self.port), 5)

    def restore(self) -> None:
        self.start()


def start_uvicorn(stack: Stack) -> str:
    """The web server as `runstack` starts it (uvicorn, the ASGI app, its options)."""
    from ops.stack import UVICORN_OPTIONS

    port = free_port()
    stack.env.setdefault("DB_CONN_MAX_AGE", "60")
    stack.start("web", [sys.executable, "-m", "uvicorn", "overlap.asgi:application",
                        "--host", "127.0.0.1", "--port", str(port), *UVICORN_OPTIONS])
    assert wait_for(lambda: port_open(port), 60), stack.log("web")
    return f"http://127.0.0.1:{port}"


def staffed_session(stack: Stack, password: str, username: str = "iv") -> tuple[str, int]:
    """A live session (token, pk) of interviewer `username` (in the interviewers group)."""
    out = stack.manage("shell", "-c", (
        "from django.contrib.auth.models import Group, User\n"
        "from catalog.models import Exercise\n"
        "from interviews import services\n"
        f"user = User.objects.create_user({username!r}, password={password!r})\n"
        "user.groups.add(Group.objects.get_or_create(name='interviewers')[0])\n"
        "exercise = Exercise.objects.get(slug='async-parameter-server')\n"
        "s = services.session_create(interviewer=user, exercise=exercise,\n"
        "    candidate_name='Ada', candidate_email='ada@example.org')\n"
        "services.session_start(session=s)\n"
        "print('SESSION', s.token, s.pk)\n"))
    line = next(line for line in out.splitlines() if line.startswith("SESSION "))
    _, token, pk = line.split()
    return token, int(pk)


def timed_get(browser: Browser, path: str) -> tuple[int, str, float]:
    started = time.monotonic()
    try:
        body = browser.get(path)
        return 200, body, time.monotonic() - started
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(errors="replace"), time.monotonic() - started
    except OSError as exc:
        return 0, f"{type(exc).__name__}: {exc}", time.monotonic() - started


def timed_post(browser: Browser, path: str, data: dict) -> tuple[int, str, float]:
    started = time.monotonic()
    try:
        body = browser.post(path, data)
        return 200, body, time.monotonic() - started
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(errors="replace"), time.monotonic() - started
    except OSError as exc:
        return 0, f"{type(exc).__name__}: {exc}", time.monotonic() - started


def _length_after(changes: list) -> int:
    """The document's length after a change set (CodeMirror's JSON form)."""
    total = 0
    for part in changes:
        if isinstance(part, int):
            total += part
        else:
            total += len("\n".join(part[1:]))
    return total


class Typist(threading.Thread):
    """Types a numbered key (one push each) every `every` seconds through a pad socket,
    appending at the end; reconnects with the page's back-off when the socket closes.
    `acked` holds (monotonic time, key) for every push the server confirmed."""

    def __init__(self, url: str, origin: str, tag: str, cookie: str = "", every: float = 0.1):
        super().__init__(daemon=True)
        self.url, self.origin, self.tag, self.cookie, self.every = url, origin, tag, cookie, every
        self.acked: list[tuple[float, str]] = []
        self.failures: list[str] = []
        self.stop = threading.Event()
        self.n = 0
        self.seen: dict[str, int] = {}

    def _connect(self):
        from websockets.sync.client import connect

        headers = {"Cookie": self.cookie} if self.cookie else None
        ws = connect(self.url, origin=self.origin, additional_headers=headers,
                     open_timeout=5, max_size=2**22)
        while True:
            message = json.loads(ws.recv(timeout=5))
            if message.get("type") == "hello":
                self.version = message["version"] + len(message["updates"])
                self.length = len(message["doc"])
                for update in message["updates"]:
                    self.length = _length_after(update["changes"])
                return ws

    def run(self) -> None:
        ws, backoff = None, 0.5
        while not self.stop.is_set():
            if ws is None:
                try:
                    ws = self._connect()
                    backoff = 0.5
                except Exception as exc:  # refused, closed, timed out: as a browser, retry
                    self.failures.append(f"{time.monotonic():.1f} {type(exc).__name__}")
                    ws = None
                    time.sleep(backoff)
                    backoff = min(backoff * 2, RECONNECT_CAP_S)
                    continue
            try:
                acked = self._type_one(ws)
            except Exception as exc:
                self.failures.append(f"{time.monotonic():.1f} {type(exc).__name__}")
                with contextlib.suppress(Exception):
                    ws.close()
                ws = None
                continue
            # After a refusal (someone else got there first) at once, as the editor does.
            time.sleep(self.every if acked else 0.01)
        if ws is not None:
            with contextlib.suppress(Exception):
                ws.close()

    def _type_one(self, ws) -> bool:
        key = f"[{self.tag}{self.n}]"
        changes = [self.length, [0, key]] if self.length else [[0, key]]
        ws.send(json.dumps({"type": "push", "version": self.version,
                            "updates": [{"clientID": self.tag, "changes": changes}]}))
        while True:
            message = json.loads(ws.recv(timeout=5))
            kind = message.get("type")
            self.seen[kind] = self.seen.get(kind, 0) + 1
            if kind == "updates":
                if message["version"] != self.version:
                    raise RuntimeError("out of step")  # resynchronise: reconnect
                for update in message["updates"]:
                    self.length = _length_after(update["changes"])
                self.version += len(message["updates"])
                if message.get("pushed"):
                    self.acked.append((time.monotonic(), key))
                    self.n += 1
                    return True
            elif kind == "pushed":  # someone else got there first: theirs arrives, retry
                if message.get("refused"):
                    self.failures.append(f"{time.monotonic():.1f} {message['refused']}")
                    time.sleep(0.5)
                return False
            elif kind == "refused":
                self.failures.append(f"{time.monotonic():.1f} {message.get('message')}")

    def first_ack_after(self, moment: float) -> float | None:
        return next((at - moment for at, _ in self.acked if at > moment), None)
