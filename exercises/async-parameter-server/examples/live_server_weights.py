"""Computes every gradient on the server's live weights instead of pulling them: no
pull to wait for, but no consistent parameters either.

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
        while (batch := self.data.next_batch()) is not None:
            gradient = await worker.compute_gradient_async(self.server, batch)
            async with self.server_lock:
                await self.server.push_async(gradient)

    async def train(self):
        await asyncio.gather(*(self.worker_loop(worker) for worker in self.workers))
