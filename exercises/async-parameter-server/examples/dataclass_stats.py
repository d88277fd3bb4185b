"""The reference design, with a dataclass (string annotations) counting each worker's
steps and a pickled copy of it: anything that works under plain `python file.py` works
in the candidate's module too.

expect: accepted
"""

from __future__ import annotations

import asyncio
import pickle
from dataclasses import dataclass, field


@dataclass
class WorkerStats:
    worker: int
    steps: int = 0
    history: list[int] = field(default_factory=list)

    def record(self, step: int) -> WorkerStats:
        self.steps += 1
        self.history.append(step)
        return self


class Trainer:
    def __init__(self, cluster):
        self.server = cluster.server
        self.workers = cluster.workers
        self.data = cluster.data
        self.server_lock = asyncio.Lock()
        self.stats = [WorkerStats(i) for i in range(len(self.workers))]

    async def worker_loop(self, index, worker):
        while (batch := self.data.next_batch()) is not None:
            async with self.server_lock:
                params = await self.server.pull_async()
            gradient = await worker.compute_gradient_async(params, batch)
            async with self.server_lock:
                await self.server.push_async(gradient)
            self.stats[index].record(self.stats[index].steps)

    async def train(self):
        await asyncio.gather(*(self.worker_loop(i, w) for i, w in enumerate(self.workers)))
        copy = pickle.loads(pickle.dumps(self.stats))
        assert copy == self.stats and sum(s.steps for s in copy) > 0
