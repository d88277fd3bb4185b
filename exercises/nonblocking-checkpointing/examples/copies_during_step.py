"""Starts the host copy as a task and goes straight on with the next step: the copy and
the step run on the GPU at the same time.

expect: wrong
failing: gpu
"""

import asyncio
from collections import deque


class Trainer:
    def __init__(self, cluster):
        self.config = cluster.config
        self.batches = cluster.batches
        self.model = cluster.model
        self.storage = cluster.storage

    async def checkpoint(self):
        copy = await self.model.snapshot_async()
        await self.storage.write_async(copy)

    async def train(self):
        complete = [c.step for c in self.storage.checkpoints() if c.complete]
        start = max(complete, default=0)
        if start:
            await self.model.restore_async(await self.storage.read_async(start))
        writes = deque()
        for step in range(start, self.config.num_steps):
            if step % self.config.checkpoint_every == 0 and step > start:
                while len(writes) >= self.config.max_in_flight:
                    await writes.popleft()
                writes.append(asyncio.create_task(self.checkpoint()))
                await asyncio.sleep(0)  # the copy starts before the step
            await self.model.train_step_async(self.batches[step])
        while len(writes) >= self.config.max_in_flight:
            await writes.popleft()
        writes.append(asyncio.create_task(self.checkpoint()))
        await asyncio.gather(*writes)
