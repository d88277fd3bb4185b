"""A half conversion: the write runs in the background, but the next checkpoint waits
for the previous write, so only one is ever in flight and training stalls.

expect: too_slow
"""

import asyncio


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
        write = None
        for step in range(start, self.config.num_steps):
            await self.model.train_step_async(self.batches[step])
            if (step + 1) % self.config.checkpoint_every == 0:
                if write is not None:
                    await write
                copy = await self.model.snapshot_async()
                write = asyncio.create_task(self.storage.write_async(copy))
        if write is not None:
            await write
