"""Benchmark of a live interview through the real stack (web, Redis, worker, sandbox).

- click-to-verdict: POST run -> the run's partial shows the verdict, fetched as the page
  does: the moment the pad's socket says the run finished, and every 500 ms meanwhile
  (the page's fallback poll); with 1 and with N concurrent live sessions. ``push=False``
  polls every 100 ms instead, with no socket (the page without its socket, polling faster).
- keystroke-to-interviewer-view: autosave POST -> the console's live-code panel, polled
  every second as the console does, shows the new text.
"""

import http.cookiejar
import json
import random
import re
import statistics
import threading
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass, field

from runner.units import in_proc


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


class Browser:
    """A cookie-keeping HTTP client that sends Django's CSRF token like htmx does."""

    def __init__(self, base: str):
        self.base = base
        self.jar = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar))

    def _csrf(self) -> str:
        return next((c.value for c in self.jar if c.name == "csrftoken"), "")

    def get(self, path: str) -> str:
        with self.opener.open(self.base + path, timeout=30) as response:
            return response.read().decode()

    def post(self, path: str, data: dict) -> str:
        request = urllib.request.Request(
            self.base + path, data=urllib.parse.urlencode(data).encode(),
            headers={"X-CSRFToken": self._csrf(), "Referer": self.base + path},
        )
        with self.opener.open(request, timeout=30) as response:
            return response.read().decode()

    def log_in(self, username: str, password: str) -> None:
        self.get("/accounts/login/")
        self.post("/accounts/login/", {"username": username, "password": password,
                                       "csrfmiddlewaretoken": self._csrf()})


@dataclass
class Samples:
    values: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, value: float) -> None:
        with self.lock:
            self.values.append(value)

    def row(self, label: str, units: dict | None = None) -> str:
        """A table row; with ``units`` (runner.units), p50 and p95 in proc units too."""
        v = self.values
        if not v:
            return f"| {label} | 0 | - | - | - | {len(self.errors)} | - | - |"
        p50, p95 = percentile(v, 0.5), percentile(v, 0.95)
        return (f"| {label} | {len(v)} | {p50:.3f} | {p95:.3f} "
                f"| {statistics.mean(v):.3f} | {len(self.errors)} "
                f"| {in_proc(p50, units or {}) or '-'} | {in_proc(p95, units or {}) or '-'} |")


RUN_ID = re.compile(r'id="run-(\d+)"')


POLL_S = 0.5  # the candidate page's fallback poll (OVERLAP_RUN_POLL_MS)
FAST_POLL_S = 0.1  # push=False: no socket, a faster poll


def click_to_verdict(base: str, token: str, code: str, runs: int, samples: Samples,
                     push: bool = True) -> None:
    browser = Browser(base)
    browser.get(f"/c/{token}/")
    socket = pad_socket(base, token) if push else None
    try:
        for i in range(runs):
            try:
                _one_click(browser, token, code, i, samples, socket)
            except OSError as exc:  # an HTTP timeout under load is a result, not a crash
                samples.errors.append(f"{type(exc).__name__}: {exc}")
    finally:
        if socket is not None:
            socket.close()


def pad_socket(base: str, token: str):
    """The candidate page's pad socket (the pushes a browser gets), past its hello."""
    from websockets.sync.client import connect

    socket = connect(base.replace("http", "ws", 1) + f"/ws/c/{token}/", origin=base,
                     open_timeout=30, max_size=2**22)
    while json.loads(socket.recv(timeout=30)).get("type") != "hello":
        pass
    return socket


def _run_news(socket, run_id: str, wait_s: float) -> None:
    """Wait up to ``wait_s`` for the socket to say the run finished (what makes the page
    fetch it at once); return early on that news, or when the wait is over."""
    deadline = time.perf_counter() + wait_s
    while (left := deadline - time.perf_counter()) > 0:
        try:
            message = json.loads(socket.recv(timeout=left))
        except TimeoutError:
            return
        if (message.get("type") == "run" and str(message.get("id")) == run_id
                and message.get("status") not in ("queued", "running")):
            return


def _one_click(browser: Browser, token: str, code: str, i: int, samples: Samples,
               socket=None) -> None:
    """POST run, then fetch the run's partial as the page does until it shows the verdict."""
    started = time.perf_counter()
    html = browser.post(f"/c/{token}/run/", {"code": f"{code}\n# run {i}\n"})
    match = RUN_ID.search(html)
    if not match:
        samples.errors.append(html[:200])
        time.sleep(1)
        return
    run_id = match.group(1)
    while "run-active" in html:
        if socket is not None:
            _run_news(socket, run_id, POLL_S)
        else:
            time.sleep(FAST_POLL_S)
        html = browser.get(f"/c/{token}/runs/{run_id}/")
        if time.perf_counter() - started > 120:
            samples.errors.append(f"run {run_id} took over 120 s")
            break
    else:
        if 'class="verdict"' not in html:
            samples.errors.append(f"run {run_id}: no verdict")
        else:
            samples.add(time.perf_counter() - started)


def keystroke_to_view(base: str, token: str, session_pk: int, staff: tuple[str, str],
                      repeats: int, samples: Samples, poll_s: float = 1.0) -> None:
    candidate = Browser(base)
    candidate.get(f"/c/{token}/")
    interviewer = Browser(base)
    interviewer.log_in(*staff)
    for i in range(repeats):
        try:
            _one_keystroke(candidate, interviewer, token, session_pk, i, samples, poll_s)
        except OSError as exc:  # an HTTP error is a result, not a crash
            samples.errors.append(f"{type(exc).__name__}: {exc}")


def _one_keystroke(candidate, interviewer, token, session_pk, i, samples, poll_s) -> None:
    marker = f"# keystroke {i} {random.random()}"
    time.sleep(random.uniform(0, poll_s))  # the console's poll phase is arbitrary
    started = time.perf_counter()
    candidate.post(f"/c/{token}/save/", {"code": f"x = {i}\n{marker}\n"})
    next_poll = started + random.uniform(0, poll_s)
    while True:
        time.sleep(max(0.0, next_poll - time.perf_counter()))
        if marker in interviewer.get(f"/sessions/{session_pk}/code/"):
            samples.add(time.perf_counter() - started)
            return
        next_poll += poll_s
        if time.perf_counter() - started > 30:
            samples.errors.append("live view never showed the change")
            return


def clicks_concurrently(base: str, tokens: list[str], code: str, runs: int,
                        push: bool = True) -> Samples:
    """One thread per live session, each clicking Run `runs` times, one run at a time."""
    samples = Samples()
    threads = [threading.Thread(target=click_to_verdict,
                                args=(base, t, code, runs, samples, push))
               for t in tokens]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return samples


def report(title: str, rows: list[str]) -> str:
    header = ["", f"### {title}", "",
              "| measure | n | p50 s | p95 s | mean s | errors | p50 proc | p95 proc |",
              "|---|---|---|---|---|---|---|---|"]
    return "\n".join(header + rows)


def as_json(samples: dict[str, Samples]) -> str:
    return json.dumps({k: {"n": len(s.values), "p50": percentile(s.values, 0.5),
                           "p95": percentile(s.values, 0.95), "errors": len(s.errors)}
                       for k, s in samples.items()}, indent=2)
