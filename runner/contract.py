"""The result contract: one typed definition of what a grading returns.

Used by the runner (both tracks build results with :func:`make_result`), by the sandbox
host (limit verdicts, and :func:`validate_result` on whatever came out of a sandbox) and
by the platform (``Run.verdict`` choices, display labels, validation before storage).
Standard library only, no Django, no torch: anything may import it.

Schema ``overlap.grade/1`` is described field by field in runner/README.md.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from enum import StrEnum

SCHEMA = "overlap.grade/1"

OUTPUT_LIMIT = 64 * 1024  # characters of stdout / stderr kept
MESSAGE_LIMIT = 2_000  # characters of a check message
RESULT_MESSAGE_LIMIT = 4_000  # characters of the result's message (limits add detail)
TRACEBACK_LIMIT = 8_000
TRACE_LIMIT = 4_000  # spans per trace
MAX_CHECKS = 64
MAX_LANES = 128
NAME_LIMIT = 120


class Status(StrEnum):
    PASS = "pass"
    FAIL = "fail"
    ERROR = "error"  # our fault (the platform, the sandbox, the exercise)
    SKIP = "skip"  # nothing graded: this machine lacks what the exercise needs (a GPU)


class Verdict(StrEnum):
    ACCEPTED = "accepted"
    WRONG = "wrong"
    TOO_SLOW = "too_slow"
    TIMEOUT = "timeout"
    SYNTAX_ERROR = "syntax_error"
    RUNTIME_ERROR = "runtime_error"
    MISSING_ENTRY_POINT = "missing_entry_point"
    NEEDS_GPU = "needs_gpu"
    INTERNAL_ERROR = "internal_error"
    # decided by the sandbox's host from what it observed, never by the program
    MEMORY_LIMIT = "memory_limit"
    PROCESS_LIMIT = "process_limit"
    OUTPUT_LIMIT = "output_limit"
    DISK_LIMIT = "disk_limit"
    CRASH = "crash"
    SANDBOX_ERROR = "sandbox_error"


STATUS_OF: dict[Verdict, Status] = {
    Verdict.ACCEPTED: Status.PASS,
    Verdict.WRONG: Status.FAIL,
    Verdict.TOO_SLOW: Status.FAIL,
    Verdict.TIMEOUT: Status.FAIL,
    Verdict.SYNTAX_ERROR: Status.FAIL,
    Verdict.RUNTIME_ERROR: Status.FAIL,
    Verdict.MISSING_ENTRY_POINT: Status.FAIL,
    Verdict.NEEDS_GPU: Status.SKIP,
    Verdict.INTERNAL_ERROR: Status.ERROR,
    Verdict.MEMORY_LIMIT: Status.FAIL,
    Verdict.PROCESS_LIMIT: Status.FAIL,
    Verdict.OUTPUT_LIMIT: Status.FAIL,
    Verdict.DISK_LIMIT: Status.FAIL,
    Verdict.CRASH: Status.ERROR,  # no result came back: it cannot be held against anyone
    Verdict.SANDBOX_ERROR: Status.ERROR,
}

# What a person reads for each verdict (the candidate's page, the console, the scorecard).
LABELS: dict[Verdict, str] = {
    Verdict.ACCEPTED: "Accepted",
    Verdict.WRONG: "Wrong result",
    Verdict.TOO_SLOW: "Correct, but not fast enough",
    Verdict.TIMEOUT: "Timed out",
    Verdict.SYNTAX_ERROR: "Syntax error",
    Verdict.RUNTIME_ERROR: "Runtime error",
    Verdict.MISSING_ENTRY_POINT: "Missing entry point",
    Verdict.NEEDS_GPU: "Needs a GPU",
    Verdict.INTERNAL_ERROR: "Internal error",
    Verdict.MEMORY_LIMIT: "Memory limit exceeded",
    Verdict.PROCESS_LIMIT: "Too many processes",
    Verdict.OUTPUT_LIMIT: "Too much output",
    Verdict.DISK_LIMIT: "Disk limit exceeded",
    Verdict.CRASH: "Crashed",
    Verdict.SANDBOX_ERROR: "Sandbox error",
}

# The grader's own verdicts (what `python -m runner grade` may answer); the rest are the
# sandbox host's.
GRADER_VERDICTS = frozenset(
    {
        Verdict.ACCEPTED,
        Verdict.WRONG,
        Verdict.TOO_SLOW,
        Verdict.TIMEOUT,
        Verdict.SYNTAX_ERROR,
        Verdict.RUNTIME_ERROR,
        Verdict.MISSING_ENTRY_POINT,
        Verdict.NEEDS_GPU,
        Verdict.INTERNAL_ERROR,
        Verdict.MEMORY_LIMIT,
    }
)


def label(verdict: str) -> str:
    """The human label of a verdict key (unknown keys are shown as they are)."""
    try:
        return LABELS[Verdict(verdict)]
    except ValueError:
        return verdict.replace("_", " ").capitalize()


class CheckStatus(StrEnum):
    PASS = "pass"
    FAIL = "fail"
    WARN = "warn"  # shown to the user; never changes the verdict
    SKIP = "skip"


@dataclass
class Check:
    """One named check of a grading."""

    name: str
    status: str
    message: str
    seed: int | None = None  # the seeded run that broke it (None: the timed run)
    scenario: str | None = None

    @classmethod
    def ok(cls, name: str, message: str) -> Check:
        return cls(name, CheckStatus.PASS.value, message)

    @classmethod
    def fail(cls, name: str, message: str) -> Check:
        return cls(name, CheckStatus.FAIL.value, message)

    @classmethod
    def warn(cls, name: str, message: str) -> Check:
        return cls(name, CheckStatus.WARN.value, message)

    @classmethod
    def skip(cls, name: str, message: str) -> Check:
        return cls(name, CheckStatus.SKIP.value, message)

    @classmethod
    def verdict(cls, name: str, passed: bool, ok: str, fail: str) -> Check:
        return cls.ok(name, ok) if passed else cls.fail(name, fail)

    @property
    def failed(self) -> bool:
        return self.status == CheckStatus.FAIL

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "status": str(self.status),
            "message": clip(self.message, MESSAGE_LIMIT),
            "seed": self.seed,
            "scenario": self.scenario,
        }


def clip(text: str, limit: int) -> str:
    text = storable(text)
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n… [{len(text) - limit} more characters cut]"


# NUL and half of a UTF-16 surrogate pair: a program can print both, JSON carries them as
# escapes, and PostgreSQL refuses to store either (in text or in JSON).
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def storable(text: str) -> str:
    """``text`` with every character a database or a page cannot hold shown as U+FFFD."""
    return _UNSTORABLE.sub("\ufffd", text)


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
    verdict = Verdict(verdict)
    return {
        "schema": SCHEMA,
        "exercise": exercise,
        "status": STATUS_OF[verdict].value,
        "verdict": verdict.value,
        "message": clip(message, MESSAGE_LIMIT),
        "checks": [c.to_json() for c in checks or []],
        "metrics": metrics or empty_metrics(),
        "trace": trace or {"baseline": None, "candidate": None},
        "stdout": clip(stdout, OUTPUT_LIMIT + 200),
        "stderr": clip(stderr, OUTPUT_LIMIT + 200),
        "error": error,
    }


# -- validation: what a result document must look like before anyone trusts it -------


class ContractError(ValueError):
    """A result document that does not follow the contract (named field, reason)."""


def _fail(path: str, why: str):
    raise ContractError(f"{path}: {why}")


def _string(value, path: str, limit: int, *, optional: bool = False) -> str | None:
    if value is None and optional:
        return None
    if not isinstance(value, str):
        _fail(path, "must be a string")
    return clip(value, limit)


def _number(value, path: str, *, optional: bool = True) -> float | int | None:
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        _fail(path, "must be a number")
    if isinstance(value, float) and not math.isfinite(value):
        _fail(path, "must be finite")
    return value


def _int(value, path: str, *, optional: bool = True) -> int | None:
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        _fail(path, "must be an integer")
    return value


def _plain(value, path: str, depth: int = 0):
    """Extra metrics (the GPU track's): numbers, short strings, small lists and dicts."""
    if depth > 3:
        _fail(path, "nested too deeply")
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        return _number(value, path)
    if isinstance(value, str):
        return _string(value, path, 500)
    if isinstance(value, list):
        if len(value) > 1000:
            _fail(path, "too many items")
        return [_plain(v, f"{path}[{i}]", depth + 1) for i, v in enumerate(value)]
    if isinstance(value, dict):
        if len(value) > 100:
            _fail(path, "too many keys")
        return {
            _string(k, path, NAME_LIMIT): _plain(v, f"{path}.{k}", depth + 1)
            for k, v in value.items()
        }
    _fail(path, "has an unsupported type")


METRIC_NUMBERS = (
    "baseline_time", "candidate_time", "speedup", "target_speedup", "bound_speedup",
)


def _metrics(value) -> dict:
    if not isinstance(value, dict):
        _fail("metrics", "must be an object")
    if len(value) > 60:
        _fail("metrics", "too many keys")
    metrics = {}
    for key, item in value.items():
        key = _string(key, "metrics", NAME_LIMIT)
        if key in METRIC_NUMBERS:
            metrics[key] = _number(item, f"metrics.{key}")
        elif key in ("seeds", "runs"):
            metrics[key] = _int(item, f"metrics.{key}")
        elif key in ("bound_note", "clock", "unit"):
            metrics[key] = _string(item, f"metrics.{key}", 1000, optional=True)
        else:
            metrics[key] = _plain(item, f"metrics.{key}")
    return metrics


def _trace_side(value, path: str) -> dict | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        _fail(path, "must be an object or null")
    lanes = value.get("lanes", [])
    if not isinstance(lanes, list) or len(lanes) > MAX_LANES:
        _fail(f"{path}.lanes", f"must be a list of at most {MAX_LANES}")
    lanes = [_string(lane, f"{path}.lanes", NAME_LIMIT) for lane in lanes]
    spans = value.get("spans", [])
    if not isinstance(spans, list) or len(spans) > TRACE_LIMIT:
        _fail(f"{path}.spans", f"must be a list of at most {TRACE_LIMIT}")
    checked = []
    for i, span in enumerate(spans):
        where = f"{path}.spans[{i}]"
        if not isinstance(span, dict):
            _fail(where, "must be an object")
        start = _number(span.get("start"), f"{where}.start", optional=False)
        end = _number(span.get("end"), f"{where}.end", optional=False)
        if end < start:
            _fail(where, "ends before it starts")
        item = {
            "lane": _string(span.get("lane"), f"{where}.lane", NAME_LIMIT),
            "op": _string(span.get("op"), f"{where}.op", NAME_LIMIT),
            "start": start,
            "end": end,
            "batch": _string(span.get("batch"), f"{where}.batch", NAME_LIMIT, optional=True),
        }
        for flag in ("blocking", "cancelled", "stream"):
            if flag in span:
                item[flag] = (
                    bool(span[flag]) if flag != "stream" else _plain(span[flag], where)
                )
        checked.append(item)
    return {
        "lanes": lanes,
        "spans": checked,
        "truncated": _int(value.get("truncated", 0), f"{path}.truncated") or 0,
        "makespan": _number(value.get("makespan"), f"{path}.makespan"),
    }


def _error(value) -> dict | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        _fail("error", "must be an object or null")
    return {
        "type": _string(value.get("type", "exception"), "error.type", NAME_LIMIT),
        "line": _int(value.get("line"), "error.line"),
        "column": _int(value.get("column"), "error.column"),
        "text": _string(value.get("text"), "error.text", 2000, optional=True),
        "traceback": _string(value.get("traceback"), "error.traceback", TRACEBACK_LIMIT,
                             optional=True),
    }


def validate_result(document) -> dict:
    """The document, checked field by field and bounded, or ContractError naming the field.

    Unknown top-level fields are dropped, except ``sandbox`` (added by the sandbox host)."""
    if not isinstance(document, dict):
        raise ContractError("the result must be a JSON object")
    try:
        verdict = Verdict(document.get("verdict"))
    except ValueError:
        _fail("verdict", f"unknown verdict {str(document.get('verdict'))[:40]!r}")
    status = document.get("status")
    if status != STATUS_OF[verdict].value:
        _fail("status", f"must be {STATUS_OF[verdict].value!r} for verdict {verdict.value!r}")
    checks = document.get("checks", [])
    if not isinstance(checks, list) or len(checks) > MAX_CHECKS:
        _fail("checks", f"must be a list of at most {MAX_CHECKS}")
    checked = []
    for i, check in enumerate(checks):
        where = f"checks[{i}]"
        if not isinstance(check, dict):
            _fail(where, "must be an object")
        try:
            check_status = CheckStatus(check.get("status")).value
        except ValueError:
            _fail(f"{where}.status", "unknown check status")
        checked.append(
            {
                "name": _string(check.get("name"), f"{where}.name", NAME_LIMIT),
                "status": check_status,
                "message": _string(check.get("message", ""), f"{where}.message", MESSAGE_LIMIT),
                "seed": _int(check.get("seed"), f"{where}.seed"),
                "scenario": _string(check.get("scenario"), f"{where}.scenario", NAME_LIMIT,
                                    optional=True),
            }
        )
    trace = document.get("trace") or {}
    if not isinstance(trace, dict):
        _fail("trace", "must be an object")
    result = {
        "schema": SCHEMA,
        "exercise": _string(document.get("exercise", ""), "exercise", NAME_LIMIT),
        "status": status,
        "verdict": verdict.value,
        "message": _string(document.get("message", ""), "message", RESULT_MESSAGE_LIMIT),
        "checks": checked,
        "metrics": _metrics(document.get("metrics") or empty_metrics()),
        "trace": {
            "baseline": _trace_side(trace.get("baseline"), "trace.baseline"),
            "candidate": _trace_side(trace.get("candidate"), "trace.candidate"),
        },
        "stdout": _string(document.get("stdout", ""), "stdout", OUTPUT_LIMIT + 200),
        "stderr": _string(document.get("stderr", ""), "stderr", OUTPUT_LIMIT + 200),
        "error": _error(document.get("error")),
    }
    if isinstance(document.get("sandbox"), dict):
        result["sandbox"] = _plain(document["sandbox"], "sandbox")
    return result
