"""Keystroke → visible on the other side, through the real stack (uvicorn, Channels, the
Redis channel layer, the database), with many live sessions typing at once.

Each session has a candidate socket typing one character every 1/rate seconds (with its
cursor, as the editor sends it) and an interviewer socket (logged in with a real
session cookie) receiving the pushes. A keystroke's latency is from the moment it is typed
to the moment the interviewer's socket has it; the k-th update of the candidate that the
interviewer receives is the k-th keystroke (only the candidate types).
"""

import asyncio
import json
import statistics
import time
from dataclasses import dataclass, field

import websockets

from runner.units import in_proc


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


@dataclass
class Result:
    latencies_ms: list[float] = field(default_factory=list)
    typed: int = 0
    errors: list[str] = field(default_factory=list)

    def row(self, label: str, units: dict | None = None) -> str:
        """A table row; with ``units`` (runner.units), p50 and p95 in proc units too."""
        v = self.latencies_ms
        if not v:
            return f"| {label} | 0 | - | - | - | - | {self.typed - len(v)} | - | - |"
        p50, p95 = percentile(v, 0.5), percentile(v, 0.95)
        in_units = [in_proc(ms / 1000, units or {}) or "-" for ms in (p50, p95)]
        return (f"| {label} | {len(v)} | {p50:.1f} | {p95:.1f} "
                f"| {percentile(v, 0.99):.1f} | {max(v):.1f} | {self.typed - len(v)} "
                f"| {in_units[0]} | {in_units[1]} |")


async def _receive_hello(ws) -> dict:
    while True:
        message = json.loads(await ws.recv())
        if message["type"] == "hello":
            return message


async def session_typing(ws_base: str, origin: str, token: str, session_pk: int, cookie: str,
                         rate: float, seconds: float, result: Result) -> None:
    headers = {"Origin": origin}
    async with websockets.connect(f"{ws_base}/ws/c/{token}/", additional_headers=headers) as cand, \
            websockets.connect(f"{ws_base}/ws/sessions/{session_pk}/",
                               additional_headers={**headers, "Cookie": cookie}) as staff:
        hello = await _receive_hello(cand)
        await _receive_hello(staff)
        version, length = hello["version"], len(hello["doc"].encode("utf-16-le")) // 2
        typed_at: list[float] = []
        queue: list[float] = []  # keystrokes typed while a push was in flight
        in_flight = asyncio.Event()
        in_flight.set()
        done = asyncio.Event()

        async def candidate_reader():
            nonlocal version
            async for raw in cand:
                message = json.loads(raw)
                if message["type"] == "updates":
                    version = max(version, message["version"] + len(message["updates"]))
                    if message.get("pushed"):
                        in_flight.set()
                elif message["type"] == "pushed":  # refused
                    result.errors.append(message.get("refused", "push refused"))
                    in_flight.set()

        async def interviewer_reader():
            seen = 0
            async for raw in staff:
                now = time.perf_counter()
                message = json.loads(raw)
                if message["type"] != "updates":
                    continue
                for update in message["updates"]:
                    if update["role"] == "candidate" and seen < len(typed_at):
                        result.latencies_ms.append((now - typed_at[seen]) * 1000)
                        seen += 1
                if done.is_set() and seen >= len(typed_at):
                    return

        async def push_pending():
            nonlocal length
            if not queue or not in_flight.is_set():
                return
            in_flight.clear()
            updates = []
            for _ in queue:
                updates.append({"clientID": f"bench-{token[:8]}",
                                "changes": [length, [0, "x"]] if length else [[0, "x"]]})
                length += 1
            queue.clear()
            # As the editor does: the cursor rides along with the text.
            await cand.send(json.dumps({"type": "push", "version": version, "updates": updates,
                                        "cursor": {"anchor": length, "head": length}}))

        readers = [asyncio.create_task(candidate_reader()),
                   asyncio.create_task(interviewer_reader())]
        interval = 1.0 / rate
        next_key = time.perf_counter()
        deadline = next_key + seconds
        while next_key < deadline:
            await asyncio.sleep(max(0.0, next_key - time.perf_counter()))
            typed_at.append(time.perf_counter())
            queue.append(typed_at[-1])
            result.typed += 1
            await push_pending()
            next_key += interval
            if queue:  # the previous push was still in flight: send as soon as it returns
                await asyncio.wait_for(in_flight.wait(), timeout=5)
                await push_pending()
        done.set()
        try:
            await asyncio.wait_for(readers[1], timeout=10)
        except TimeoutError:
            result.errors.append("the interviewer did not receive every keystroke")
        readers[0].cancel()


async def run(ws_base: str, origin: str, sessions: list[tuple[str, int]], cookie: str,
              rate: float, seconds: float) -> Result:
    result = Result()
    tasks = []
    for i, (token, pk) in enumerate(sessions):
        await asyncio.sleep(0.05 * i / max(1, len(sessions)) / rate * 20)  # spread the phases
        tasks.append(asyncio.create_task(session_typing(ws_base, origin, token, pk, cookie,
                                                        rate, seconds, result)))
    for outcome in await asyncio.gather(*tasks, return_exceptions=True):
        if isinstance(outcome, BaseException):
            result.errors.append(f"{type(outcome).__name__}: {outcome}")
    return result


def report(title: str, rows: list[str]) -> str:
    return "\n".join(["", f"### {title}", "",
                      "| measure | n | p50 ms | p95 ms | p99 ms | max ms | lost | p50 proc "
                      "| p95 proc |",
                      "|---|---|---|---|---|---|---|---|---|", *rows])


def summary(result: Result) -> dict:
    v = result.latencies_ms
    return {"n": len(v), "typed": result.typed, "p50_ms": percentile(v, 0.5),
            "p95_ms": percentile(v, 0.95), "mean_ms": statistics.mean(v) if v else None,
            "errors": result.errors[:5]}
