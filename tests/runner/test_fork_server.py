"""The process a run gets from the fork server: on the grader's CPU, within its limits.

The grader and a run take turns; every round trip wakes the other side, which on one CPU
costs a few microseconds and across two about ten times as much (runner/README.md,
"Cost"). A server started ahead of its grader (a pooled sandbox) still gives each run the
grader's own resource limits."""

import json
import os
import resource

import pytest

from runner import forkserver
from runner.sim import grading

PS = "async-parameter-server"

PRINTS_ITS_CPUS = """
import json
import os
import resource

class Trainer:
    def __init__(self, cluster):
        self.cluster = cluster

    def train(self):
        print("cpus", sorted(os.sched_getaffinity(0)))
"""


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs to choose from")
def test_the_run_is_held_on_one_cpu_and_the_grader_is_released_after(write_code):
    before = os.sched_getaffinity(0)
    result = grading.grade(PS, write_code(PRINTS_ITS_CPUS), seeds=0)
    line = next(line for line in result["stdout"].splitlines() if line.startswith("cpus"))
    cpus = json.loads(line.removeprefix("cpus "))
    assert len(cpus) == 1 and cpus[0] in before
    assert os.sched_getaffinity(0) == before


def test_a_run_takes_the_graders_lower_limits_and_is_never_given_higher_ones():
    pid = os.fork()
    if pid == 0:  # a stand-in for a run's process, before confine() applies the request
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (200, 300))
            forkserver.lower_rlimits({"NOFILE": [64, 64], "FSIZE": [0, 0], "CORE": [-1, -1]})
            lowered = resource.getrlimit(resource.RLIMIT_NOFILE) == (64, 64)
            forkserver.lower_rlimits({"NOFILE": [1000, 1000]})  # higher: ignored
            kept = resource.getrlimit(resource.RLIMIT_NOFILE) == (64, 64)
            no_files = resource.getrlimit(resource.RLIMIT_FSIZE) == (0, 0)
            os._exit(0 if lowered and kept and no_files else 1)
        finally:
            os._exit(2)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
