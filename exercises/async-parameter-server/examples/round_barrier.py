"""Workers compute in parallel, but every round waits for the slowest (a barrier).

expect: wrong
failing: workers_independent
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

    async def one_batch(self, worker, batch):
        async with self.server_lock:
            params = await self.server.pull_async()
        gradient = await worker.compute_gradient_async(params, batch)
        async with self.server_lock:
            await self.server.push_async(gradient)

    async def train(self):
        while True:
            jobs = []
            for worker in self.workers:
                batch = self.data.next_batch()
                if batch is not None:
                    jobs.append(self.one_batch(worker, batch))
            if not jobs:
                return
            await asyncio.gather(*jobs)  # the round ends with its slowest worker
