"""Pushes are locked, pulls are not: a pull can read half an update.

expect: wrong
failing: no_torn_reads
"""

import asyncio


class Trainer:
    def __init__(self, cluster):
        self.config = cluster.config
        self.server = cluster.server
        self.workers = cluster.workers
        self.data = cluster.data
        self.server_lock = asyncio.Lock()

    async def worker_loop(self, worker):
        while (batch := self.data.next_batch()) is not None:
            params = await self.server.pull_async()  # no lock: may tear
            gradient = await worker.compute_gradient_async(params, batch)
            async with self.server_lock:
                await self.server.push_async(gradient)

    async def train(self):
        await asyncio.gather(*(self.worker_loop(worker) for worker in self.workers))
