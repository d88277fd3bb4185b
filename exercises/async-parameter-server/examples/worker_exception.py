"""The slowest worker trips over a bug in its own bookkeeping.

expect: runtime_error
"""

import asyncio


class Trainer:
    def __init__(self, cluster):
        self.config = cluster.config
        self.server = cluster.server
        self.workers = cluster.workers
        self.data = cluster.data
        self.server_lock = asyncio.Lock()
        self.done_by_worker = {}

    async def worker_loop(self, worker):
        while (batch := self.data.next_batch()) is not None:
            async with self.server_lock:
                params = await self.server.pull_async()
            gradient = await worker.compute_gradient_async(params, batch)
            if worker.index == 3:
                self.done_by_worker[worker.index] += 1  # never initialised
            async with self.server_lock:
                await self.server.push_async(gradient)

    async def train(self):
        await asyncio.gather(*(self.worker_loop(worker) for worker in self.workers))
