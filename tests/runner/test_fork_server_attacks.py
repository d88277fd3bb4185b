"""A program that stops or kills its own fork server (it shares the server's uid) gets a
verdict of its own within seconds: never a hang, never internal_error, and the next
grading in the same process is served by a fresh server. Where the kernel's Landlock
scopes signals (ABI 6, Linux 6.12) the signal is refused outright: a runtime error too."""

import time

import pytest

from runner import forkserver, landlock, tracks

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
