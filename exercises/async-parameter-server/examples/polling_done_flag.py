"""Correct, but train() waits for the workers by polling a counter with
`await asyncio.sleep(0)`: slower to read, not slower to run, and never a livelock.

expect: accepted
"""

import asyncio


class Trainer:
    def __init__(self, cluster):
        self.server = cluster.server
        self.workers = cluster.workers
        self.data = cluster.data
        self.server_lock = asyncio.Lock()
        self.finished = 0

    async def worker_loop(self, worker):
        while (batch := self.data.next_batch()) is not None:
            async with self.server_lock:
                params = await self.server.pull_async()
            gradient = await worker.compute_gradient_async(params, batch)
            async with self.server_lock:
                await self.server.push_async(gradient)
        self.finished += 1

    async def train(self):
        tasks = [asyncio.create_task(self.worker_loop(worker)) for worker in self.workers]
        while self.finished < len(self.workers):
            await asyncio.sleep(0)
        await asyncio.gather(*tasks)
