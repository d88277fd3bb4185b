"""Free-running workers (asynchronous SGD) instead of backups: a gradient that arrives
after a step is added to the next one, computed on out-of-date weights.

expect: wrong
failing: accumulation
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
        self.arrived = asyncio.Condition(self.lock)

    async def work(self, worker):
        while True:
            gradient = await worker.compute_gradient_async(self.model, self.data.next_batch())
            async with self.arrived:
                await self.buffer.add_async(gradient)
                self.arrived.notify_all()

    async def train(self):
        loops = [asyncio.create_task(self.work(worker)) for worker in self.workers]
        for _ in range(self.config.num_steps):
            async with self.arrived:
                await self.arrived.wait_for(
                    lambda: len(self.buffer) >= self.config.gradients_per_step
                )
                await self.model.step_async(self.buffer)
        for loop in loops:
            loop.cancel()
        await asyncio.gather(*loops, return_exceptions=True)
        return await self.model.snapshot_async()
