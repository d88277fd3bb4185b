"""Patches the grader in memory (checks, verdict, plausibility), then skips the training.

Nothing it patches exists in the grading process: its own process is a fresh fork, and
the grader decides from the weights and losses it sends back.

expect: wrong
failing: validation
"""

import sys

from runner.contract import Check, make_result
from runner.gpu import timing


def _all_pass(run, reference):
    names = ("validation", "losses", "stop_epoch", "final_weights", "wasted_work")
    return [Check.ok(name, "ok") for name in names]


def _accepted(exercise, checks, *args, **kwargs):
    return make_result(exercise=exercise.slug, verdict="accepted", message="accepted")


for name, module in list(sys.modules.items()):
    if name.startswith("overlap_grader_"):  # the exercise's grader module
        module.check = _all_pass
        if hasattr(module, "EXERCISE"):
            module.EXERCISE.check = _all_pass
            module.EXERCISE.trials = 1
try:
    from runner.gpu import grading

    grading._verdict = _accepted
    grading._run_checks = lambda exercise, run, reference: _all_pass(run, reference)
except Exception:
    pass
timing.implausible_speedup = lambda *args: None
timing.less_work = lambda *args: None


class Trainer:
    def __init__(self, job):
        self.job = job

    def train(self):
        weights = [p.detach().clone() for p in self.job.model.parameters()]
        self.job.optimizer._recorder.steps = 10_000  # the step count the harness keeps
        return {"stop_epoch": 0, "weights": weights, "losses": [0.0]}
