"""Resumes from the first complete checkpoint listed (the oldest), so the steps after it
are trained a second time.

expect: wrong
failing: resume
"""

import asyncio
from collections import deque


class Trainer:
    def __init__(self, cluster):
        self.config = cluster.config
        self.batches = cluster.batches
        self.model = cluster.model
        self.storage = cluster.storage

    async def train(self):
        complete = [c.step for c in self.storage.checkpoints() if c.complete]
        start = complete[0] if complete else 0
        if start:
            await self.model.restore_async(await self.storage.read_async(start))
        writes = deque()
        for step in range(start, self.config.num_steps):
            await self.model.train_step_async(self.batches[step])
            if (step + 1) % self.config.checkpoint_every == 0:
                while len(writes) >= self.config.max_in_flight:
                    await writes.popleft()
                copy = await self.model.snapshot_async()
                writes.append(asyncio.create_task(self.storage.write_async(copy)))
        await asyncio.gather(*writes)
