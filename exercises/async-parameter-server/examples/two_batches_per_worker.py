"""Runs two loops per worker, so a worker computes two batches at once.

expect: wrong
failing: fresh_weights, one_batch_per_worker, plausible
"""

import asyncio


class Trainer:
    def __init__(self, cluster):
        self.server = cluster.server
        self.workers = cluster.workers
        self.data = cluster.data
        self.server_lock = asyncio.Lock()

    async def worker_loop(self, worker):
        while (batch := self.data.next_batch()) is not None:
            async with self.server_lock:
                params = await self.server.pull_async()
            gradient = await worker.compute_gradient_async(params, batch)
            async with self.server_lock:
                await self.server.push_async(gradient)

    async def train(self):
        await asyncio.gather(
            *(self.worker_loop(worker) for worker in self.workers for _ in range(2))
        )
