"""Cancels the stragglers, then awaits them directly: the CancelledError escapes train().

expect: runtime_error
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
        arrivals = asyncio.as_completed(tasks)
        for _ in range(self.config.gradients_per_step):
            await self.buffer.add_async(await next(arrivals))
        for task in tasks:
            task.cancel()
        for task in tasks:
            await task  # a cancelled task raises CancelledError here
        await self.model.step_async(self.buffer)

    async def train(self):
        for _ in range(self.config.num_steps):
            await self.train_step()
        return await self.model.snapshot_async()
