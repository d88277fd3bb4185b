"""Worker tasks, but the gradient is computed with the blocking call.

expect: too_slow
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
            async with self.server_lock:
                params = await self.server.pull_async()
            gradient = worker.compute_gradient(params, batch)  # blocks the loop
            async with self.server_lock:
                await self.server.push_async(gradient)

    async def train(self):
        await asyncio.gather(*(self.worker_loop(worker) for worker in self.workers))
