"""The same code always gets the same verdict, speedup and checks."""

import json

from runner.sim import grading
from tests.runner.helpers import EXERCISES, run_cli


def _essentials(result: dict):
    return (
        result["verdict"],
        result["metrics"]["speedup"],
        result["metrics"]["candidate_time"],
        [(c["name"], c["status"], c["seed"], c["message"]) for c in result["checks"]],
    )


def test_grading_twenty_times_gives_identical_results():
    path = EXERCISES / "async-gradient-accumulation" / "examples" / "race_no_lock.py"
    first = grading.grade("async-gradient-accumulation", path, seeds=3)
    for _ in range(19):
        again = grading.grade("async-gradient-accumulation", path, seeds=3)
        assert _essentials(again) == _essentials(first)
        assert again["trace"] == first["trace"]


def test_separate_processes_agree_byte_for_byte():
    path = str(EXERCISES / "pipeline-model-parallel" / "examples" / "stage_workers.py")
    outputs = [run_cli("grade", "pipeline-model-parallel", path).stdout for _ in range(2)]
    assert outputs[0] == outputs[1]
    assert json.loads(outputs[0])["verdict"] == "accepted"


def test_seeded_runs_really_change_the_schedule():
    # Different seeds must produce different interleavings, or they would find nothing.
    from runner.exercise import load

    exercise = load("async-parameter-server")
    source = (exercise.directory / "examples" / "no_lock.py").read_text()
    orders = set()
    for seed in (None, 1, 2, 3):
        run = grading.run_program(exercise, source, exercise.timed, seed, time_limit=100)
        orders.add(tuple(push.batch for push in run.cluster.server.pushes))
    assert len(orders) > 1


SET_OF_OBJECTS = """
import asyncio


class Job:
    def __init__(self, worker):
        self.worker = worker


class Trainer:
    def __init__(self, cluster):
        self.server, self.workers, self.data = cluster.server, cluster.workers, cluster.data
        self.lock = asyncio.Lock()

    async def run(self, job):
        while (batch := self.data.next_batch()) is not None:
            async with self.lock:
                params = await self.server.pull_async()
            gradient = await job.worker.compute_gradient_async(params, batch)
            async with self.lock:
                await self.server.push_async(gradient)

    async def train(self):
        junk = [object() for _ in range(1000)]  # moves later allocations around
        jobs = {Job(worker) for worker in self.workers}  # a set: iterated in hash order
        tasks = {asyncio.create_task(self.run(job)) for job in jobs}
        await asyncio.wait(tasks)
        del junk
"""


def test_a_set_of_objects_is_iterated_alike_in_every_process(tmp_path):
    # Objects hash by address unless the grader pins it; the schedule (and so the
    # speedup and the trace) must not depend on where a process put them.
    path = tmp_path / "sets.py"
    path.write_text(SET_OF_OBJECTS)
    outputs = [
        run_cli("grade", "async-parameter-server", str(path), "--seeds", "2").stdout
        for _ in range(4)
    ]
    assert len(set(outputs)) == 1


UNSEEDED_RANDOMNESS = """
import os
import random
import secrets
import uuid


class Trainer:
    def __init__(self, cluster):
        self.model = cluster.model

    def train(self):
        rng = random.Random()  # seeded from the OS, as CPython does when no seed is given
        first = random.random()
        random.seed()  # reseeded "from the OS"
        print(rng.random(), first, random.random(), os.urandom(4).hex(), uuid.uuid4().hex,
              random.SystemRandom().random(), secrets.token_hex(4), random.Random(7).random())
        return self.model
"""


def test_randomness_a_program_does_not_seed_is_the_same_in_every_run_and_process(tmp_path):
    """`random.Random()`, `os.urandom`, `uuid4`, `SystemRandom`, `secrets` draw from the
    OS unless seeded: a trainer that picks its backup workers with them would get a new
    schedule, speedup, verdict on every click. In the candidate's process they draw from
    one fixed sequence instead (seeded generators are untouched)."""
    path = tmp_path / "random.py"
    path.write_text(UNSEEDED_RANDOMNESS)
    outputs = [
        json.loads(run_cli("grade", "async-gradient-accumulation", str(path), "--seeds", "2")
                   .stdout)["stdout"]
        for _ in range(3)
    ]
    assert len(set(outputs)) == 1
    values = outputs[0].split()
    assert len(values) == 8
    assert values[-1] == str(__import__("random").Random(7).random())
    assert len(set(values)) == len(values)  # still random-looking, not a constant


PRINTS_ADDRESSES = """
class Job:
    pass


class Trainer:
    def __init__(self, cluster):
        self.model = cluster.model

    async def work(self):
        return None

    def train(self):
        first, second = Job(), Job()
        coroutine = self.work()
        print(first, second, first)
        coroutine.close()
        raise RuntimeError(f"stuck on {coroutine!r} for {first!r}")
"""


def test_addresses_a_program_prints_or_raises_are_numbered_alike_in_every_process(tmp_path):
    """`<Job object at 0x7f…>` changes from process to process (address-space
    randomisation): in the result, each address becomes @1, @2… in order of appearance."""
    path = tmp_path / "addresses.py"
    path.write_text(PRINTS_ADDRESSES)
    outputs = [run_cli("grade", "async-gradient-accumulation", str(path)).stdout
               for _ in range(2)]
    assert outputs[0] == outputs[1]
    result = json.loads(outputs[0])
    assert result["verdict"] == "runtime_error"
    job = "<__candidate__.Job object at {}>"
    printed = [job.format("@1"), job.format("@2"), job.format("@1")]
    assert result["stdout"] == " ".join(printed) + "\n"
    assert "coroutine object Trainer.work at @3> for " + job.format("@1") in result["message"]
    assert "0x" not in outputs[0]


READS_THE_CLOCKS = """
import datetime
import time
from datetime import date, datetime as dt


class Trainer:
    def __init__(self, cluster):
        self.model = cluster.model

    def train(self):
        print(datetime.datetime.now().isoformat(), dt.utcnow().isoformat(), dt.today(),
              date.today(), time.clock_gettime(time.CLOCK_REALTIME),
              time.clock_gettime_ns(time.CLOCK_MONOTONIC), time.process_time(),
              time.thread_time_ns(), dt.now(datetime.timezone.utc).year)
        return self.model
"""


def test_every_clock_a_program_can_read_is_the_virtual_one(tmp_path):
    """datetime.now(), clock_gettime, process_time... read the real clock unless patched:
    printed, they made every result document different. Two processes, two gradings each
    (a run is graded several times): byte-identical output, at the virtual clock's date."""
    path = tmp_path / "clocks.py"
    path.write_text(READS_THE_CLOCKS)
    outputs = [
        json.loads(run_cli("grade", "async-gradient-accumulation", str(path), "--seeds", "2")
                   .stdout)["stdout"]
        for _ in range(2)
    ]
    assert len(set(outputs)) == 1, outputs
    assert outputs[0].startswith("2023-11-14T")  # WALL_CLOCK_BASE, not today


SETS_OF_BUILTINS = """
import asyncio


class Trainer:
    def __init__(self, cluster):
        self.server, self.workers, self.data = cluster.server, cluster.workers, cluster.data
        self.lock = asyncio.Lock()

    async def run(self, worker):
        while (batch := self.data.next_batch()) is not None:
            async with self.lock:
                params = await self.server.pull_async()
            gradient = await worker.compute_gradient_async(params, batch)
            async with self.lock:
                await self.server.push_async(gradient)

    async def train(self):
        junk = [bytearray(i % 97 + 1) for i in range(3000)]  # moves allocations around
        coroutines = {self.run(worker) for worker in self.workers}  # hashed by address
        sentinels = {object() for _ in range(50)}
        functions = {(lambda i=i: i) for i in range(50)}
        print(sorted(functions, key=list(functions).index)[0]())
        del junk, sentinels
        await asyncio.gather(*coroutines)
"""


def test_sets_of_coroutines_and_other_builtins_iterate_alike_in_five_processes(tmp_path):
    # Coroutines, functions and object() cannot be re-hashed: they hash by address, and
    # a randomised address space gave another schedule (and speedup) in each process.
    path = tmp_path / "builtins.py"
    path.write_text(SETS_OF_BUILTINS)
    outputs = [
        run_cli("grade", "async-parameter-server", str(path), "--seeds", "2").stdout
        for _ in range(5)
    ]
    assert len(set(outputs)) == 1
    assert json.loads(outputs[0])["verdict"] == "accepted"
