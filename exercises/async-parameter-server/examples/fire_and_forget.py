"""Starts the worker tasks and returns without waiting for them.

expect: wrong
failing: clean_shutdown, every_batch_once, no_lost_updates, plausible
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
            gradient = await worker.compute_gradient_async(params, batch)
            async with self.server_lock:
                await self.server.push_async(gradient)

    async def train(self):
        self.tasks = [asyncio.create_task(self.worker_loop(w)) for w in self.workers]
        await asyncio.sleep(0.5)  # "long enough"?
