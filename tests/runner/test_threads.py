"""The program's threads (asyncio.to_thread, run_in_executor) interleave where real
threads would: each runs until it waits, and meanwhile the loop and the others go on.
The golden examples threads_no_lock.py (wrong), threads_with_lock.py and
to_thread_compute.py (accepted) show the verdicts; these show the rest."""

import json

from runner.sim import grading
from tests.runner.helpers import EXERCISES, run_cli

PS = "async-parameter-server"


def test_threads_interleave_alike_in_every_process():
    path = str(EXERCISES / PS / "examples" / "threads_no_lock.py")
    outputs = [run_cli("grade", PS, path, "--seeds", "2").stdout for _ in range(2)]
    assert outputs[0] == outputs[1]
    assert json.loads(outputs[0])["verdict"] == "wrong"


SLEEPS_IN_A_THREAD = """
import asyncio
import time


class Trainer:
    def __init__(self, cluster):
        self.server, self.workers, self.data = cluster.server, cluster.workers, cluster.data
        self.lock = asyncio.Lock()

    def slow_compute(self, worker, params, batch):
        time.sleep(0.05)  # this thread waits; the others and the loop go on
        return worker.compute_gradient(params, batch)

    async def run(self, worker):
        while (batch := self.data.next_batch()) is not None:
            async with self.lock:
                params = await self.server.pull_async()
            gradient = await asyncio.to_thread(self.slow_compute, worker, params, batch)
            async with self.lock:
                await self.server.push_async(gradient)

    async def train(self):
        await asyncio.gather(*(self.run(w) for w in self.workers))
"""


def test_a_thread_that_sleeps_does_not_stop_the_others(tmp_path):
    path = tmp_path / "sleeps.py"
    path.write_text(SLEEPS_IN_A_THREAD)
    result = grading.grade(PS, path, seeds=1)
    # Serialised, 48 sleeps of 0.05 s would add 2.4 s to the makespan; overlapped, each
    # worker adds its own 12 x 0.05 s at most.
    assert result["verdict"] in ("accepted", "too_slow"), result["message"]
    baseline = result["metrics"]["baseline_time"]
    assert result["metrics"]["candidate_time"] < baseline / 2


LOOP_WAITS_ON_A_THREADS_LOCK = """
import asyncio
import threading


class Trainer:
    def __init__(self, cluster):
        self.server = cluster.server
        self.lock = threading.Lock()

    def hold(self):
        with self.lock:
            self.server.pull()  # waits for the loop while holding the lock

    async def train(self):
        holder = asyncio.ensure_future(asyncio.to_thread(self.hold))
        await asyncio.sleep(0)
        with self.lock:  # the loop itself blocks on it
            pass
        await holder
"""


def test_the_event_loop_waiting_on_a_threads_lock_is_an_error_that_says_so(tmp_path):
    path = tmp_path / "loop_waits.py"
    path.write_text(LOOP_WAITS_ON_A_THREADS_LOCK)
    result = grading.grade(PS, path, seeds=1)
    assert result["verdict"] == "runtime_error", result["message"]
    assert "threading lock" in result["message"]
