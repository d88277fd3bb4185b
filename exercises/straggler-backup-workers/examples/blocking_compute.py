"""The backup-worker structure, but with the blocking compute call: nothing overlaps.

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

    async def compute(self, worker, batch):
        return worker.compute_gradient(self.model, batch)  # blocks every task

    async def train_step(self):
        tasks = [
            asyncio.create_task(self.compute(worker, self.data.next_batch()))
            for worker in self.workers
        ]
        for added, arrival in enumerate(asyncio.as_completed(tasks), start=1):
            gradient = await arrival
            await self.buffer.add_async(gradient)
            if added == self.config.gradients_per_step:
                break
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self.model.step_async(self.buffer)

    async def train(self):
        for _ in range(self.config.num_steps):
            await self.train_step()
        return await self.model.snapshot_async()
