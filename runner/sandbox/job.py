"""What goes into a sandbox (the job) and what comes out of it (the envelope).

The job carries the files themselves, never host paths: the sandbox sees copies, and the
host never reads a file back from inside a sandbox. The envelope is the only thing the host
reads, from the sandbox's stdout, bounded, and it must carry the job's nonce.
"""

import base64
import json
import os
import secrets
import stat
from dataclasses import dataclass, field
from pathlib import Path

from runner.sandbox.limits import Limits

PROTOCOL = 1
# Interviewer-only parts of an exercise never enter a sandbox: candidate code could read them.
EXCLUDED_NAMES = frozenset({"guide.yaml", "solution.py", "examples"})
MAX_EXERCISE_BYTES = 8 * 1024 * 1024
CANDIDATE_FILE = "candidate.py"
EXERCISE_DIR = "exercise"


class JobError(ValueError):
    """The host could not build a job (an exercise too large, an unreadable file)."""


def exercise_files(exercise_dir: Path, exclude=EXCLUDED_NAMES) -> dict[str, bytes]:
    """Regular files of an exercise folder; symlinks and special files are skipped, never
    followed (an exercise is a folder of plain files)."""
    root = Path(exercise_dir)
    if not root.is_dir():
        raise JobError(f"{root} is not a folder")
    files: dict[str, bytes] = {}
    total = 0
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        rel_dir = Path(dirpath).relative_to(root)
        dirnames[:] = sorted(
            d
            for d in dirnames
            if not d.startswith(".")
            and d != "__pycache__"
            and not (rel_dir == Path(".") and d in exclude)
        )
        for name in sorted(filenames):
            if name.startswith(".") or name.endswith(".pyc"):
                continue
            if rel_dir == Path(".") and name in exclude:
                continue
            path = Path(dirpath) / name
            if not stat.S_ISREG(os.lstat(path).st_mode):
                continue
            data = path.read_bytes()
            total += len(data)
            if total > MAX_EXERCISE_BYTES:
                raise JobError(f"exercise {root.name} is larger than {MAX_EXERCISE_BYTES} bytes")
            files[(rel_dir / name).as_posix()] = data
    return files


@dataclass
class Job:
    """One run: the files to write, what to run, and the limits the sandbox enforces."""

    entry: dict
    files: dict[str, bytes]
    limits: Limits
    workdir: str = "/tmp/job"
    tmp_dir: str = "/tmp"
    env: dict[str, str] = field(default_factory=dict)
    rlimits: dict[str, int] = field(default_factory=dict)
    # The entry itself is the candidate's code (a script job): it runs as the candidate's
    # user where the sandbox's first process can switch users (runner.privileges).
    as_candidate: bool = False
    nonce: str = field(default_factory=lambda: secrets.token_hex(16))

    def payload(self) -> bytes:
        body = json.dumps(
            {
                "protocol": PROTOCOL,
                "nonce": self.nonce,
                "files": {k: base64.b64encode(v).decode() for k, v in self.files.items()},
                "workdir": self.workdir,
                "tmp_dir": self.tmp_dir,
                "entry": self.entry,
                "env": self.env,
                "wall_s": self.limits.wall_s,
                "stall_s": self.limits.stall_s,
                "backstop_s": self.limits.backstop_s,
                "stdout_bytes": self.limits.result_bytes,
                "stderr_bytes": self.limits.output_bytes,
                "rlimits": self.rlimits,
                "as_candidate": self.as_candidate,
            }
        ).encode()
        return b"%d\n%s" % (len(body), body)

    def envelope_cap(self) -> int:
        """The most the host reads back: both streams, JSON-escaped at worst, plus room."""
        return 6 * (self.limits.result_bytes + self.limits.output_bytes) + 65536


def grade_job(exercise_dir, code: str, seeds: int, limits: Limits) -> Job:
    """The job for `python -m runner grade <exercise> <code> --seeds N` inside a sandbox."""
    files = {f"{EXERCISE_DIR}/{k}": v for k, v in exercise_files(Path(exercise_dir)).items()}
    files[CANDIDATE_FILE] = code.encode()
    # "{workdir}" is filled in inside the sandbox: each backend puts the job elsewhere.
    argv = ["grade", "{workdir}/" + EXERCISE_DIR, "{workdir}/" + CANDIDATE_FILE]
    return Job(
        entry={"module": "runner", "argv": [*argv, "--seeds", str(int(seeds))]},
        files=files,
        limits=limits,
    )


def script_job(code: str, limits: Limits, argv: list[str] | None = None) -> Job:
    """A generic job: the code itself runs as __main__ and prints its own JSON result."""
    return Job(
        entry={"script": CANDIDATE_FILE, "argv": list(argv or [])},
        files={CANDIDATE_FILE: code.encode()},
        limits=limits,
    )


class EnvelopeError(ValueError):
    pass


def parse_envelope(raw: bytes, nonce: str) -> dict:
    """The envelope the sandbox's first process printed; anything else is refused."""
    text = raw.decode("utf-8", errors="strict").strip()
    if not text or "\n" in text:
        raise EnvelopeError("the sandbox did not report exactly one line")
    try:
        envelope = json.loads(text)
    except ValueError as exc:
        raise EnvelopeError(f"the sandbox's report is not JSON: {exc}") from None
    if not isinstance(envelope, dict):
        raise EnvelopeError("the sandbox's report is not an object")
    if envelope.get("protocol") != PROTOCOL or envelope.get("nonce") != nonce:
        raise EnvelopeError("the sandbox's report does not belong to this run")
    if envelope.get("error"):
        return {"error": str(envelope["error"])[:2000]}
    checks = {
        "exit_code": (int, type(None)),
        "signal": (int, type(None)),
        "grading_s": (int, float),
        "stdout": (str,),
        "stderr": (str,),
        "stdout_bytes": (int,),
        "stderr_bytes": (int,),
        "limit": (str, type(None)),
        "oom_kills": (int, type(None)),
        "pids_max_events": (int, type(None)),
        "tmp_free_bytes": (int, type(None)),
    }
    for key, types in checks.items():
        value = envelope.get(key)
        if not isinstance(value, types) or isinstance(value, bool):
            raise EnvelopeError(f"the sandbox's report has a bad {key!r}")
    if envelope["limit"] not in (None, "timeout", "output_limit"):
        raise EnvelopeError("the sandbox's report has an unknown limit")
    if envelope.get("timeout") not in (None, "cpu", "stall", "wall"):
        raise EnvelopeError("the sandbox's report has an unknown timeout")
    return envelope
