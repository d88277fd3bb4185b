"""Concurrent, but only the first N workers: every straggler still holds up its step.

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
        self.lock = asyncio.Lock()

    async def contribute(self, worker):
        gradient = await worker.compute_gradient_async(self.model, self.data.next_batch())
        async with self.lock:
            await self.buffer.add_async(gradient)

    async def train(self):
        for _ in range(self.config.num_steps):
            primaries = self.workers[: self.config.gradients_per_step]
            await asyncio.gather(*(self.contribute(worker) for worker in primaries))
            await self.model.step_async(self.buffer)
        return await self.model.snapshot_async()
