"""The grading result: its JSON schema (versioned), verdicts, and output bounding.

See runner/README.md for the schema. Everything a candidate controls (output,
messages built from their exceptions, traces) is bounded here.
"""

from __future__ import annotations

import io
from dataclasses import dataclass

SCHEMA = "overlap.grade/1"

OUTPUT_LIMIT = 64 * 1024  # characters of stdout / stderr kept
MESSAGE_LIMIT = 2_000  # characters of a check message
TRACEBACK_LIMIT = 8_000
TRACE_LIMIT = 4_000  # spans per trace

# verdict -> status. `skip`: nothing was graded because this machine lacks what the
# exercise needs (a GPU); neither the candidate's failure nor ours.
VERDICTS = {
    "accepted": "pass",
    "wrong": "fail",
    "too_slow": "fail",
    "timeout": "fail",
    "syntax_error": "fail",
    "runtime_error": "fail",
    "missing_entry_point": "fail",
    "needs_gpu": "skip",
    "internal_error": "error",
}

CHECK_STATUSES = ("pass", "fail", "warn", "skip")


@dataclass
class Check:
    """One named check. ``warn`` is shown to the user but never changes the verdict."""

    name: str
    status: str
    message: str
    seed: int | None = None  # the shuffle seed that broke it (None: the unshuffled run)
    scenario: str | None = None

    @classmethod
    def ok(cls, name: str, message: str) -> Check:
        return cls(name, "pass", message)

    @classmethod
    def fail(cls, name: str, message: str) -> Check:
        return cls(name, "fail", message)

    @classmethod
    def warn(cls, name: str, message: str) -> Check:
        return cls(name, "warn", message)

    @classmethod
    def verdict(cls, name: str, passed: bool, ok: str, fail: str) -> Check:
        return cls.ok(name, ok) if passed else cls.fail(name, fail)

    @property
    def failed(self) -> bool:
        return self.status == "fail"

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "status": self.status,
            "message": clip(self.message, MESSAGE_LIMIT),
            "seed": self.seed,
            "scenario": self.scenario,
        }


def clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n… [{len(text) - limit} more characters cut]"


class BoundedText(io.TextIOBase):
    """A text stream that keeps the first ``limit`` characters and counts the rest."""

    def __init__(self, limit: int = OUTPUT_LIMIT) -> None:
        super().__init__()
        self.limit = limit
        self._parts: list[str] = []
        self._kept = 0
        self.dropped = 0

    def writable(self) -> bool:
        return True

    def write(self, text) -> int:
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        room = self.limit - self._kept
        if room > 0:
            part = text[:room]
            self._parts.append(part)
            self._kept += len(part)
        self.dropped += max(0, len(text) - max(room, 0))
        return len(text)

    def flush(self) -> None:
        pass

    def getvalue(self) -> str:
        text = "".join(self._parts)
        if self.dropped:
            text += f"\n… [{self.dropped} more characters of output cut]"
        return text


class NullText(BoundedText):
    """Swallows output (runs whose output nobody reads)."""

    def __init__(self) -> None:
        super().__init__(0)


def empty_metrics() -> dict:
    return {
        "baseline_time": None,
        "candidate_time": None,
        "speedup": None,
        "target_speedup": None,
        "bound_speedup": None,
        "bound_note": "",
        "clock": "virtual",
        "unit": "s",
        "seeds": 0,
        "runs": 0,
    }


def make_result(
    *,
    exercise: str,
    verdict: str,
    message: str,
    checks: list[Check] | None = None,
    metrics: dict | None = None,
    trace: dict | None = None,
    stdout: str = "",
    stderr: str = "",
    error: dict | None = None,
) -> dict:
    result = {
        "schema": SCHEMA,
        "exercise": exercise,
        "status": VERDICTS[verdict],
        "verdict": verdict,
        "message": clip(message, MESSAGE_LIMIT),
        "checks": [c.to_json() for c in checks or []],
        "metrics": metrics or empty_metrics(),
        "trace": trace or {"baseline": None, "candidate": None},
        "stdout": clip(stdout, OUTPUT_LIMIT + 200),
        "stderr": clip(stderr, OUTPUT_LIMIT + 200),
        "error": error,
    }
    return result
