"""A run's process and the grader take turns on one CPU, and the grader gets its CPUs back.

Every round trip between them wakes the other side; on one CPU that costs a few
microseconds, across two CPUs about ten times as much (runner/README.md, "Cost")."""

import json
import os

import pytest

from runner import grading

PS = "async-parameter-server"

PRINTS_ITS_CPUS = """
import json
import os

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
