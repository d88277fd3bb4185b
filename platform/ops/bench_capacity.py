"""How many live interviews one machine serves: N sessions played at an interview's pace
through the real stack, N stepped up until the bar is missed.

Each session is a candidate and an interviewer, as their pages behave:

- the candidate's pad socket types a few characters a second at the end of the pad (in a
  comment under the exercise's reference solution, so every Run grades correct code) and
  waits for each push to be acknowledged before the next, as the editor does;
- every 20-40 s (seeded) the candidate clicks Run: once every change is on the server the
  page POSTs the run with its pad version, then fetches the run's partial when the socket
  says the run finished, and every 500 ms meanwhile, until it shows the verdict; the
  run-history list is fetched on each run message, the hints every 15 s;
- the interviewer's console has its own socket open and fetches the run panel every second
  and on each run message, the integrity panel every 15 s.

A step passes when click -> verdict p95 is within the bar, every click got a verdict and
every verdict is "accepted" (no `timeout`, no platform error). The answer is the largest N
of the steps that passed before the first that failed.
"""

import asyncio
import contextlib
import json
import random
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import websockets

from ops.bench_live import POLL_S, RUN_ID, Browser, percentile
from runner.units import in_proc

TYPED = "\n# tuning: push fewer, larger gradients; the slowest worker sets the pace "
CLICK_GIVE_UP_S = 90.0  # a click with no verdict by then is counted as lost
CONSOLE_POLL_S = 1.0  # the console's run panel (hx-trigger every 1s)
SIDE_PANELS_S = 15.0  # hints (candidate) and integrity (console): every 15s


@dataclass
class Pace:
    seconds: float = 90.0  # how long a step plays (no click starts after)
    rate: float = 3.0  # characters typed a second
    between: tuple[float, float] = (20.0, 40.0)  # seconds between two clicks on Run
    seed: int = 24


@dataclass
class Step:
    n: int
    seconds: float = 0.0  # how long it played
    clicks: list[tuple[float, int]] = field(default_factory=list)  # (click->verdict s, run)
    acks_ms: list[float] = field(default_factory=list)  # keystroke typed -> push acknowledged
    errors: list[str] = field(default_factory=list)  # clicks without a verdict, refusals
    verdicts: dict[int, str] = field(default_factory=dict)  # run id -> verdict (database)

    @property
    def latencies(self) -> list[float]:
        return [s for s, _ in self.clicks]

    @property
    def timeouts(self) -> int:
        return sum(v == "timeout" for v in self.verdicts.values())

    @property
    def not_accepted(self) -> int:
        """Verdicts other than "accepted" (timeouts included) for the reference solution."""
        return sum(v != "accepted" for v in self.verdicts.values())

    def passes(self, bar_s: float) -> bool:
        v = self.latencies
        return bool(v) and percentile(v, 0.95) <= bar_s and not self.errors \
            and self.not_accepted == 0


def search(steps: list[int], play, bar_s: float, log=lambda line: None) -> tuple[int, list]:
    """Play each N of ``steps`` (``play(n) -> Step``) until one misses the bar; the largest
    N that passed (0 when the first failed) and every step played."""
    played, best = [], 0
    for n in steps:
        step = play(n)
        played.append(step)
        ok = step.passes(bar_s)
        log(f"N={n}: {'pass' if ok else 'FAIL'} ({len(step.clicks)} runs, "
            f"p95 {percentile(step.latencies, 0.95):.2f} s, {step.timeouts} timeouts, "
            f"{step.not_accepted} not accepted, {len(step.errors)} errors)")
        if not ok:
            break
        best = n
    return best, played


async def _news_or(news: asyncio.Event, seconds: float) -> None:
    """Wait for ``news``, or ``seconds`` at most (the page's next poll)."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(news.wait(), timeout=seconds)


class _Candidate:
    """One candidate's page: the pad socket (typing) and the Run button."""

    def __init__(self, base: str, token: str, http, pace: Pace, rng: random.Random,
                 step: Step):
        self.base, self.token, self.http, self.pace, self.rng = base, token, http, pace, rng
        self.step = step
        self.browser = Browser(base)
        self.version = 0
        self.length = 0  # the document's length in UTF-16 units (only this side types)
        self.queue: list[tuple[str, float]] = []  # typed, not yet sent: (char, typed at)
        self.in_flight: list[tuple[str, float]] = []
        self.synced = asyncio.Event()
        self.synced.set()
        self.finished: set[str] = set()  # runs the socket said are finished
        self.news = asyncio.Event()

    async def play(self, deadline: float) -> None:
        await self.http(self.browser.get, f"/c/{self.token}/")
        ws_base = self.base.replace("http", "ws", 1)
        async with websockets.connect(f"{ws_base}/ws/c/{self.token}/", origin=self.base,
                                      max_size=2**22, open_timeout=60) as self.ws:
            while (hello := json.loads(await self.ws.recv()))["type"] != "hello":
                pass
            self.version = hello["version"]
            self.length = len(hello["doc"].encode("utf-16-le")) // 2
            reader = asyncio.create_task(self._read())
            side = asyncio.create_task(self._hints())
            typist = asyncio.create_task(self._type(deadline))
            try:
                await self._click(deadline)
                typist.cancel()
            finally:
                for task in (reader, side, typist):
                    task.cancel()

    async def _read(self) -> None:
        async for raw in self.ws:
            message = json.loads(raw)
            kind = message.get("type")
            if kind == "updates":
                self.version = max(self.version, message["version"] + len(message["updates"]))
                if message.get("pushed"):
                    now = time.perf_counter()
                    self.step.acks_ms += [(now - at) * 1000 for _, at in self.in_flight]
                    self.in_flight = []
                    await self._send()
            elif kind == "pushed" and not message.get("ok", True):
                self.step.errors.append(f"push refused: {message.get('refused', '')}")
                self.length -= len(self.in_flight)  # those characters are not in the pad
                self.in_flight = []
                await self.ws.send(json.dumps({"type": "pull", "version": self.version}))
            elif kind == "run":
                if message.get("status") not in ("queued", "running"):
                    self.finished.add(str(message.get("id")))
                self.news.set()
                # The run history refreshes on every run message (after 150 ms).
                asyncio.get_running_loop().call_later(
                    0.15, lambda: asyncio.ensure_future(self._quietly(f"/c/{self.token}/runs/")))

    async def _quietly(self, path: str) -> None:
        with contextlib.suppress(OSError):
            await self.http(self.browser.get, path)

    async def _hints(self) -> None:
        while True:
            await asyncio.sleep(SIDE_PANELS_S)
            await self._quietly(f"/c/{self.token}/hints/")

    async def _send(self) -> None:
        """Send what was typed since the last push, once that push is acknowledged."""
        if self.in_flight or not self.queue:
            if not self.in_flight and not self.queue:
                self.synced.set()
            return
        updates = []
        for char, _ in self.queue:
            changes = [0, "", ""] if char == "\n" else [0, char]
            updates.append({"clientID": f"bench-{self.token[:8]}",
                            "changes": [self.length, changes] if self.length else [changes]})
            self.length += 1
        self.in_flight, self.queue = self.queue, []
        await self.ws.send(json.dumps({
            "type": "push", "version": self.version, "updates": updates,
            "cursor": {"anchor": self.length, "head": self.length}}))

    async def _type(self, deadline: float) -> None:
        next_key, i = time.perf_counter() + self.rng.uniform(0, 1 / self.pace.rate), 0
        while next_key < deadline:
            await asyncio.sleep(max(0.0, next_key - time.perf_counter()))
            self.queue.append((TYPED[i % len(TYPED)], time.perf_counter()))
            self.synced.clear()
            i += 1
            await self._send()
            next_key += self.rng.uniform(0.5, 1.5) / self.pace.rate

    async def _click(self, deadline: float) -> None:
        low, high = self.pace.between
        at = time.perf_counter() + self.rng.uniform(1.0, low)  # sessions start out of phase
        while at < deadline:
            await asyncio.sleep(max(0.0, at - time.perf_counter()))
            await self._one_click()
            at = max(at + self.rng.uniform(low, high), time.perf_counter())

    async def _one_click(self) -> None:
        clicked = time.perf_counter()
        try:
            # As the page: Run waits until every change is on the server.
            await asyncio.wait_for(self.synced.wait(), timeout=30)
            html = await self.http(self.browser.post, f"/c/{self.token}/run/",
                                   {"version": str(self.version)})
            match = RUN_ID.search(html)
            if not match:
                self.step.errors.append(f"Run refused: {html[:120]!r}")
                return
            run_id = match.group(1)
            while "run-active" in html:
                if run_id not in self.finished:
                    self.news.clear()
                    await _news_or(self.news, POLL_S)
                html = await self.http(self.browser.get, f"/c/{self.token}/runs/{run_id}/")
                if time.perf_counter() - clicked > CLICK_GIVE_UP_S:
                    self.step.errors.append(f"run {run_id}: no verdict in {CLICK_GIVE_UP_S:g} s")
                    return
            self.step.clicks.append((time.perf_counter() - clicked, int(run_id)))
        except (OSError, TimeoutError) as exc:  # an HTTP error under load is a result
            self.step.errors.append(f"{type(exc).__name__}: {exc}")


async def _console(base: str, pk: int, browser: Browser, http, deadline: float,
                   step: Step) -> None:
    """The interviewer's console: its socket open, the run panel fetched every second and
    on each run message, the integrity panel every 15 s."""
    await http(browser.get, f"/sessions/{pk}/")
    cookie = "; ".join(f"{c.name}={c.value}" for c in browser.jar)
    news = asyncio.Event()

    async def read(ws):
        async for raw in ws:
            if json.loads(raw).get("type") == "run":
                news.set()

    ws_base = base.replace("http", "ws", 1)
    async with websockets.connect(f"{ws_base}/ws/sessions/{pk}/", origin=base,
                                  additional_headers={"Cookie": cookie}, max_size=2**22,
                                  open_timeout=60) as ws:
        while json.loads(await ws.recv())["type"] != "hello":  # closed if not allowed
            pass
        reader = asyncio.create_task(read(ws))
        side_at = time.perf_counter() + SIDE_PANELS_S
        try:
            while time.perf_counter() < deadline:
                news.clear()
                await _news_or(news, CONSOLE_POLL_S)
                try:
                    if 'id="runs"' not in await http(browser.get, f"/sessions/{pk}/runs/"):
                        step.errors.append("console: the run panel did not come back")
                    if time.perf_counter() >= side_at:
                        side_at += SIDE_PANELS_S
                        await http(browser.get, f"/sessions/{pk}/integrity/")
                except OSError as exc:
                    step.errors.append(f"console: {type(exc).__name__}: {exc}")
        finally:
            reader.cancel()


async def _play(base: str, sessions: list[tuple[str, int]], staff: Browser, pace: Pace,
                step: Step) -> None:
    executor = ThreadPoolExecutor(max_workers=4 * len(sessions) + 4)
    loop = asyncio.get_running_loop()

    def http(fn, *args):
        return loop.run_in_executor(executor, fn, *args)

    rng = random.Random(f"{pace.seed}-{len(sessions)}")
    deadline = time.perf_counter() + pace.seconds
    candidates = [_Candidate(base, token, http, pace, random.Random(rng.random()), step)
                  for token, _ in sessions]
    tasks = [asyncio.create_task(c.play(deadline)) for c in candidates]
    consoles = [asyncio.create_task(_console(base, pk, staff, http, deadline, step))
                for _, pk in sessions]
    try:
        for outcome in await asyncio.gather(*tasks, return_exceptions=True):
            if isinstance(outcome, BaseException):
                step.errors.append(f"candidate: {type(outcome).__name__}: {outcome}")
    finally:
        for task in consoles:
            task.cancel()
        await asyncio.gather(*consoles, return_exceptions=True)
        executor.shutdown(wait=False, cancel_futures=True)


def play(base: str, sessions: list[tuple[str, int]], staff: Browser, pace: Pace) -> Step:
    """Play the sessions ``(token, pk)`` for ``pace.seconds``; the verdicts are left for
    the caller to read from the database (``Step.verdicts``)."""
    step = Step(len(sessions), seconds=pace.seconds)
    asyncio.run(_play(base, sessions, staff, pace, step))
    return step


def table(steps: list[Step], units: dict) -> str:
    def both(seconds: float) -> str:
        proc = in_proc(seconds, units)
        return f"{seconds:.2f} s = {proc} proc" if proc else f"{seconds:.2f} s"

    rows = ["| N | played | runs | p50 click->verdict | p95 click->verdict | max click->verdict "
            "| timeouts | other not accepted | lost/errors | keystroke->ack p95 |",
            "|---|---|---|---|---|---|---|---|---|---|"]
    for step in steps:
        v = step.latencies
        cells = [both(percentile(v, q)) for q in (0.5, 0.95)] + [both(max(v))] if v \
            else ["-", "-", "-"]
        ack = percentile(step.acks_ms, 0.95) / 1000 if step.acks_ms else None
        rows.append(f"| {step.n} | {step.seconds:.0f} s | {len(v)} | {' | '.join(cells)} "
                    f"| {step.timeouts} | {step.not_accepted - step.timeouts} | {len(step.errors)} "
                    f"| {both(ack) if ack is not None else '-'} |")
    return "\n".join(rows)
