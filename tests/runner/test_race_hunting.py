"""Races are hunted with seeded shuffles, and a failure names its seed for replay."""

from runner.sim import grading
from tests.runner.helpers import TINY, check

# Correct only if the two computations that finish at the same instant complete in
# the order they were started, which the plain FIFO loop happens to guarantee.
ORDER_DEPENDENT = """
import asyncio


class Trainer:
    def __init__(self, cluster):
        self.cluster = cluster

    async def train(self):
        data, weights = self.cluster.data, self.cluster.weights
        first, second = data.next_batch(), data.next_batch()
        finished = []

        async def compute(worker, batch):
            await worker.compute_gradient_async(weights, batch)
            finished.append(batch)

        workers = self.cluster.workers
        await asyncio.gather(compute(workers[0], first), compute(workers[1], second))
        if finished[0] is not first:  # "cannot happen": redo it
            await self.cluster.workers[0].compute_gradient_async(weights, finished[0])
        while (batch := data.next_batch()) is not None:
            await self.cluster.workers[0].compute_gradient_async(weights, batch)
"""


def test_plain_run_alone_misses_the_race(write_code):
    result = grading.grade(TINY, write_code(ORDER_DEPENDENT), seeds=0)
    assert check(result, "every_batch_once")["status"] == "pass"


def test_shuffled_runs_find_it_and_name_the_seed(write_code):
    result = grading.grade(TINY, write_code(ORDER_DEPENDENT), seeds=20)
    failed = check(result, "every_batch_once")
    assert result["verdict"] == "wrong"
    assert failed["status"] == "fail"
    assert isinstance(failed["seed"], int) and failed["seed"] >= 1
    assert f"seed {failed['seed']}" in result["message"]


def test_the_named_seed_replays_the_failure(write_code):
    path = write_code(ORDER_DEPENDENT)
    seed = check(grading.grade(TINY, path, seeds=20), "every_batch_once")["seed"]
    replay = grading.grade(TINY, path, replay_seed=seed)
    assert check(replay, "every_batch_once")["status"] == "fail"
    assert replay["metrics"]["runs"] == 2  # the replayed seed on each scenario, nothing else


def test_kit_yield_points_expose_an_unlocked_read_modify_write():
    # Concurrent adds to the gradient buffer without a lock lose gradients.
    from runner.exercise import load

    exercise = load("async-gradient-accumulation")
    result = grading.grade(exercise.directory, exercise.directory / "examples" / "race_no_lock.py")
    accumulation = check(result, "accumulation")
    assert accumulation["status"] == "fail"
    assert "instead of 8" in accumulation["message"]


# Fails in every seeded run (a jittered cost puts the clock off the 0.5 s grid), and
# in no plain run.
FAILS_WHEN_SEEDED = """
import asyncio


class Trainer:
    def __init__(self, cluster):
        self.cluster = cluster

    async def train(self):
        data, weights, workers = self.cluster.data, self.cluster.weights, self.cluster.workers
        loop = asyncio.get_running_loop()
        start, done = loop.time(), 0
        while (batch := data.next_batch()) is not None:
            await workers[done % 2].compute_gradient_async(weights, batch)
            done += 1
            if abs(loop.time() - start - done * 0.5) > 1e-9:
                raise RuntimeError("a cost off the grid")
"""


def test_a_replayed_seed_runs_only_where_the_grading_ran_it(tmp_path, write_code):
    """The timed scenario takes one seed here: replaying seed 3 (found on the other
    scenario) gives the timed scenario its plain run, as the grading did, instead of a
    seeded run the grading never made."""
    exercise = tmp_path / "capped"
    exercise.mkdir()
    grader = (TINY / "grader.py").read_text().replace(
        'Scenario("main", Config(), timed=True), Scenario("odd", Config(batches=3), seeds=2)',
        'Scenario("main", Config(), timed=True, seeds=1), Scenario("odd", Config(batches=3))',
    )
    assert "seeds=1)" in grader
    (exercise / "grader.py").write_text(grader)
    for name in ("starter.py", "solution.py"):
        if (TINY / name).exists():
            (exercise / name).write_text((TINY / name).read_text())
    path = write_code(FAILS_WHEN_SEEDED)
    graded = grading.grade(exercise, path, seeds=4)
    assert "shuffle seed 1 of the 'main' scenario" in graded["message"]
    replay = grading.grade(exercise, path, replay_seed=3)
    assert replay["verdict"] == "runtime_error"
    assert "shuffle seed 3 of the 'odd' scenario" in replay["message"], replay["message"]

