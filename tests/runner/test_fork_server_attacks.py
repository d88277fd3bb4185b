"""A program that stops or kills its own fork server (it shares the server's uid) gets a
verdict of its own within seconds: never a hang, never internal_error, and the next
grading in the same process is served by a fresh server. Where the kernel's Landlock
scopes signals (ABI 6, Linux 6.12) the signal is refused outright: a runtime error too."""

import contextlib
import os
import signal as signal_module
import time

import pytest

from runner import forkserver, landlock, tracks
from tests.runner.helpers import run_cli

SLUG = "async-parameter-server"

ATTACK = '''
import os, signal

os.kill(os.getppid(), signal.{signal})


class Trainer:
    def __init__(self, cluster):
        self.cluster = cluster

    async def train(self):
        return None
'''


@pytest.mark.parametrize("signal", ["SIGSTOP", "SIGKILL"])
def test_stopping_or_killing_the_fork_server_is_the_programs_verdict(write_code, signal):
    started = time.monotonic()
    result = tracks.grade(SLUG, write_code(ATTACK.format(signal=signal)))
    elapsed = time.monotonic() - started
    assert result["verdict"] == "runtime_error", result["message"]
    if landlock.abi() >= 6:  # signals cannot leave the run's Landlock domain at all
        assert "PermissionError" in result["message"], result["message"]
    else:
        assert "stopped or killed the process that starts the grader's runs" in (
            result["message"])
    assert elapsed < 4 * forkserver.ASK_TIMEOUT_S
    # The next grading in this process gets a fresh server and the usual verdict.
    from pathlib import Path

    solution = Path(__file__).resolve().parents[2] / "exercises" / SLUG / "solution.py"
    assert tracks.grade(SLUG, str(solution))["verdict"] == "accepted"


DAEMON = '''
import os


class Trainer:
    def __init__(self, cluster):
        self.cluster = cluster

    async def train(self):
        if os.fork() == 0:
            os.setsid()  # another session and group: the run's kill misses it
            if os.fork() == 0:
                while True:
                    pass
            os._exit(0)
        return None
'''


def _escaped_runs() -> list[int]:
    """Processes of the candidates' fork-server image in a session other than ours (fork
    servers stay in the grader's; runs, and what they start, do not): none should
    outlive the grading that made them."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read()
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if b"runner.candidate" in cmdline and int(fields[3]) != os.getsid(0):
            found.append(int(entry))
    return found


def test_a_setsid_daemon_a_run_leaves_dies_with_the_run(write_code):
    path = write_code(DAEMON)
    before = set(_escaped_runs())
    result = run_cli("grade", SLUG, str(path), "--seeds", "3")
    assert result.returncode == 0, result.stderr
    time.sleep(0.5)
    left = set(_escaped_runs()) - before
    for pid in left:  # do not leave them burning CPU for the rest of the suite
        with contextlib.suppress(OSError):
            os.kill(pid, signal_module.SIGKILL)
    assert not left, f"{len(left)} processes outlived the grading"
