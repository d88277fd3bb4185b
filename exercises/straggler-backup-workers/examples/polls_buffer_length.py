"""Every worker task adds its own gradient; train_step polls the buffer's length until
N are in. Correct (the count is checked under the lock, so no extra gradient gets in),
only a poll: a real loop's clock moves while it spins, and so does the grader's.

expect: accepted
"""

import asyncio


class Trainer:
    def __init__(self, cluster):
        self.config = cluster.config
        self.data = cluster.data
        self.workers = cluster.workers
        self.buffer = cluster.buffer
        self.model = cluster.model
        self.lock = asyncio.Lock()
        self.added = 0

    async def contribute(self, worker):
        gradient = await worker.compute_gradient_async(self.model, self.data.next_batch())
        async with self.lock:
            if self.added < self.config.gradients_per_step:
                self.added += 1
                await self.buffer.add_async(gradient)

    async def train_step(self):
        self.added = 0
        tasks = [asyncio.create_task(self.contribute(worker)) for worker in self.workers]
        while len(self.buffer) < self.config.gradients_per_step:
            await asyncio.sleep(0)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self.model.step_async(self.buffer)

    async def train(self):
        for _ in range(self.config.num_steps):
            await self.train_step()
        return await self.model.snapshot_async()
