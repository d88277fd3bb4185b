"""Overlaps the writes correctly but always trains from scratch: the checkpoints an
earlier run left are ignored and its steps are trained again.

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
        writes = deque()
        for step in range(self.config.num_steps):
            await self.model.train_step_async(self.batches[step])
            if (step + 1) % self.config.checkpoint_every == 0:
                while len(writes) >= self.config.max_in_flight:
                    await writes.popleft()
                copy = await self.model.snapshot_async()
                writes.append(asyncio.create_task(self.storage.write_async(copy)))
        await asyncio.gather(*writes)
