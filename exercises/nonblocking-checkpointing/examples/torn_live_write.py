"""Writes the live model in the background, without a host copy: training goes on
during the write, so the optimizer state written is of a later step than the weights.

expect: wrong
failing: consistency
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
        start = max(complete, default=0)
        if start:
            await self.model.restore_async(await self.storage.read_async(start))
        writes = deque()
        for step in range(start, self.config.num_steps):
            await self.model.train_step_async(self.batches[step])
            if (step + 1) % self.config.checkpoint_every == 0:
                while len(writes) >= self.config.max_in_flight:
                    await writes.popleft()
                # no copy: the write reads the weights now, the optimizer state later
                writes.append(asyncio.create_task(self.storage.write_async(self.model)))
        await asyncio.gather(*writes)
