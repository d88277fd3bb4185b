"""Uses the first N gradients, but lets the stragglers finish before the next step.

expect: too_slow
"""

import asyncio


class Trainer:
    def __init__(self, cluster):
        self.config = cluster.config
        self.data = cluster.data
        self.workers = cluster.workers
        self.buffer = cluster.buffer
        self.model = cluster.model

    async def train_step(self):
        tasks = [
            asyncio.create_task(worker.compute_gradient_async(self.model, self.data.next_batch()))
            for worker in self.workers
        ]
        added = 0
        for arrival in asyncio.as_completed(tasks):
            gradient = await arrival
            if added < self.config.gradients_per_step:
                await self.buffer.add_async(gradient)
                added += 1
        await self.model.step_async(self.buffer)

    async def train(self):
        for _ in range(self.config.num_steps):
            await self.train_step()
        return await self.model.snapshot_async()
