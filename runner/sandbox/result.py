"""Turning what a sandbox reported into the run's result.

Limit verdicts come from what the host and the sandbox's first process observed (exit
status, OOM kills, the pids counter, bytes counted, the clock), never from what the graded
program printed. Only when no limit was hit is the grader's JSON used, and then only after
validation: known fields must have the right types and everything is bounded.
"""

import json
import signal
from dataclasses import dataclass

from runner import contract
from runner.sandbox.job import EnvelopeError, parse_envelope
from runner.sandbox.limits import Limits

DISK_FULL_BYTES = 64 * 1024
MAX_MESSAGE = 4000
MAX_VERDICT = 64


@dataclass
class RawRun:
    """What a backend saw of one run, before any interpretation."""

    stdout: bytes = b""  # the sandbox's stdout (the envelope), bounded
    stderr: bytes = b""  # the sandbox's own stderr tail, for diagnostics
    exit_status: int | None = None
    host_timeout: bool = False
    oom_killed: bool = False
    pids_max_events: int = 0
    truncated: bool = False
    error: str | None = None


def _limit_result(verdict: str, message: str, stdout: str = "", stderr: str = "") -> dict:
    result = contract.make_result(exercise="", verdict=verdict, message=message)
    result.update(stdout=stdout, stderr=stderr)
    return result


def _tail(text: str, limit: int) -> str:
    return text if len(text) <= limit else "…" + text[-limit:]


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def interpret(raw: RawRun, nonce: str, limits: Limits) -> tuple[dict, float | None]:
    """The result for one run (without its `sandbox` section) and the grading time the
    sandbox measured (None when it reported nothing)."""
    envelope = None
    problem = raw.error
    if raw.truncated:
        problem = "the sandbox's report was larger than allowed"
    elif raw.stdout:
        try:
            envelope = parse_envelope(raw.stdout, nonce)
        except (EnvelopeError, UnicodeDecodeError) as exc:
            problem = str(exc)
    if envelope is not None and envelope.get("error"):
        problem, envelope = envelope["error"], None
    grading_s = envelope["grading_s"] if envelope else None
    return _decide(raw, envelope, problem, limits), grading_s


def _decide(raw: RawRun, envelope: dict | None, problem: str | None, limits: Limits) -> dict:
    keep = limits.output_bytes
    out = _tail(envelope["stdout"], keep) if envelope else ""
    err = _tail(envelope["stderr"], keep) if envelope else ""

    if raw.oom_killed or (envelope and (envelope["oom_kills"] or 0) > 0):
        return _limit_result(
            "memory_limit",
            f"The run used more than {limits.memory_mib:g} MiB of memory and was stopped.",
            out,
            err,
        )
    if raw.pids_max_events > 0 or (envelope and (envelope["pids_max_events"] or 0) > 0):
        return _limit_result(
            "process_limit",
            f"The run tried to have more than {limits.processes} processes and threads"
            " at once; starting more failed.",
            out,
            err,
        )
    if envelope and envelope["limit"] == "output_limit":
        if envelope["stderr_bytes"] > limits.output_bytes:
            message = (
                f"The run wrote more than {limits.output_kib:g} KiB of output and was stopped."
            )
        else:
            message = (
                f"The grader's result was larger than {limits.result_kib:g} KiB "
                "(or the run wrote that much to stdout); the run was stopped."
            )
        return _limit_result("output_limit", message, "", err)
    disk_full = envelope and (
        envelope["signal"] == signal.SIGXFSZ
        or (envelope["tmp_free_bytes"] is not None and envelope["tmp_free_bytes"] < DISK_FULL_BYTES)
    )
    if disk_full:
        return _limit_result(
            "disk_limit",
            f"The run wrote more than {limits.disk_mib:g} MiB to disk (/tmp is the only "
            "writable place).",
            out,
            err,
        )
    if raw.host_timeout or (envelope and envelope["limit"] == "timeout"):
        why = (envelope or {}).get("timeout") or "wall"
        message = {
            "cpu": f"The run used more than {limits.wall_s:g} s of CPU and was stopped.",
            "stall": f"The run made no progress for {limits.stall_s:g} s (every process "
            "waiting for something that never came: a real lock, input, a socket) and was "
            "stopped.",
        }.get(why, f"The run took longer than {limits.backstop_s:g} s of real time (the "
                   "machine is overloaded) and was stopped.")
        return _limit_result("timeout", message, out, err)
    if envelope is None:
        detail = problem or "no report"
        if raw.exit_status is not None:
            detail += f"; exit status {raw.exit_status}"
        diag = _tail(raw.stderr.decode("utf-8", errors="replace"), 2000)
        return _limit_result(
            "sandbox_error", f"The sandbox failed before the run finished ({detail}).", "", diag
        )
    result = _grader_result(envelope["stdout"], limits)
    if result is not None:
        return result
    if envelope["signal"] is not None:
        how = f"was killed by {_signal_name(envelope['signal'])}"
    elif envelope["exit_code"] is not None:
        how = f"exited with status {envelope['exit_code']}"
    else:
        how = "ended"
    return _limit_result(
        "crash", f"The run {how} without producing a result.", _tail(out, keep), err
    )


def _grader_result(stdout: str, limits: Limits) -> dict | None:
    """The grader's JSON document, validated against the contract; None when there is none.

    The grader's stdout holds exactly one JSON document and nothing else (the candidate's
    code runs in another process and never holds that descriptor), so the whole output
    must parse: a stray byte before or after it means it is not the grader's.
    """
    text = stdout.strip()
    if not text.startswith("{"):
        return None
    try:
        document = json.loads(text)
    except ValueError:
        return None
    return validate_result(document, limits)


def validate_result(document: dict, limits: Limits) -> dict | None:
    """Check the grader's result against the contract; None if it does not conform."""
    try:
        result = contract.validate_result(document)
    except contract.ContractError:
        return None
    for key in ("stdout", "stderr"):
        result[key] = _tail(result[key], limits.output_bytes)
    return result
