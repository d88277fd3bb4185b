"""A program that reaches for the grader's own process (its limits, priority, scheduling
policy) gets a verdict of its own, never internal_error and never a pass.

Where the grader can switch users (root on a host with a readable interpreter, the
docker sandbox's trusted side) the program runs under a uid of its own and the kernel
refuses the call; where it shares the grader's uid (a pyenv interpreter under /root, an
unprivileged grader, bwrap as a user) the grader notices what changed, names it, and puts back what
it may. tests/sandbox covers the first case inside docker."""

import json
import os
import resource
import subprocess
import sys

import pytest

from runner import privileges
from tests.runner.helpers import REPO, solution_source

# `python -m runner grade` in a process that first writes its pid (the grader's) into
# the program to grade.
AS_GRADER = (
    "import os, runpy, sys; path = sys.argv[3]; "
    "code = open(path).read().replace('GRADER_PID', str(os.getpid())); "
    "open(path, 'w').write(code); sys.argv[0] = 'runner'; "
    "runpy.run_module('runner', run_name='__main__')"
)


def graded_by_its_target(path, *args):
    done = subprocess.run([sys.executable, "-c", AS_GRADER, "grade", SLUG, str(path), *args],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    return done

SLUG = "async-parameter-server"

REACH = '''
import os, resource


def grader_pid():
    # /proc is closed to a run's process; the grading below writes its own pid here, as
    # a program that guessed it would know it.
    return GRADER_PID


{solution}


_train = Trainer.train


async def train(self):
    grader = grader_pid()
    {attack}
    await _train(self)


Trainer.train = train
'''

ATTACKS = {
    "hard_nofile": "resource.prlimit(grader, resource.RLIMIT_NOFILE, (12, 12))",
    "renice": "os.setpriority(os.PRIO_PROCESS, grader, 19)",
    "sched_idle": "os.sched_setscheduler(grader, os.SCHED_IDLE, os.sched_param(0))",
    "address_space": "resource.prlimit(grader, resource.RLIMIT_AS, (1 << 28, 1 << 28))",
}


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_a_program_that_changes_the_graders_process_gets_its_own_verdict(attack, tmp_path):
    code = tmp_path / "reach.py"
    code.write_text(REACH.format(solution=solution_source(SLUG), attack=ATTACKS[attack]))
    # A grading process of its own: a lowered hard limit cannot be taken back here.
    proc = graded_by_its_target(code, "--seeds", "2")
    result = json.loads(proc.stdout)
    assert result["verdict"] == "runtime_error", (result["message"], proc.stderr[-2000:])
    message = result["message"]
    assert "changed the grader's own" in message or "PermissionError" in message, message


def test_the_same_program_without_the_reach_is_accepted(tmp_path):
    code = tmp_path / "plain.py"
    code.write_text(REACH.format(solution=solution_source(SLUG), attack="del grader"))
    result = json.loads(graded_by_its_target(code, "--seeds", "2").stdout)
    assert result["verdict"] == "accepted", result["message"]


def test_tampering_is_named_and_what_may_be_restored_is_restored():
    before = privileges.attributes()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(64, soft // 2), hard))
    try:
        changed = privileges.tampered(before)
        assert changed == ["RLIMIT_NOFILE"]
        privileges.restore(before, changed)
        assert privileges.tampered(before) == []
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_the_candidates_uid_is_used_only_where_the_grader_can_switch_and_python_is_readable(
    monkeypatch,
):
    monkeypatch.setenv("OVERLAP_CANDIDATE_UID", "23456")
    assert privileges.candidate_uid() == 23456
    options = privileges.switch_user()
    if privileges.can_switch() and privileges.interpreter_open_to_candidate():
        assert options == {"user": 23456, "group": 23456, "extra_groups": []}
    else:
        assert options == {}
    monkeypatch.setenv("OVERLAP_CANDIDATE_UID", "0")  # never root
    assert privileges.candidate_uid() == privileges.DEFAULT_CANDIDATE_UID
    assert os.getuid() != 23456
