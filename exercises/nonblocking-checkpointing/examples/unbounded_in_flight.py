"""Starts every write at once, never waiting for a free slot: host memory would hold
more copies than max_in_flight.

expect: wrong
failing: in_flight, plausible
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
        writes = []
        for step in range(start, self.config.num_steps):
            await self.model.train_step_async(self.batches[step])
            if (step + 1) % self.config.checkpoint_every == 0:
                copy = await self.model.snapshot_async()
                writes.append(asyncio.create_task(self.storage.write_async(copy)))
        await asyncio.gather(*writes)
