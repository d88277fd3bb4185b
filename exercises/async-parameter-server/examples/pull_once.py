"""Each worker pulls the parameters once, at the start, and never again: every later
gradient is computed on stale weights.

expect: wrong
failing: fresh_weights
"""

import asyncio


class Trainer:
    def __init__(self, cluster):
        self.server = cluster.server
        self.workers = cluster.workers
        self.data = cluster.data
        self.server_lock = asyncio.Lock()

    async def worker_loop(self, worker):
        async with self.server_lock:
            params = await self.server.pull_async()
        while (batch := self.data.next_batch()) is not None:
            gradient = await worker.compute_gradient_async(params, batch)
            async with self.server_lock:
                await self.server.push_async(gradient)

    async def train(self):
        await asyncio.gather(*(self.worker_loop(worker) for worker in self.workers))
