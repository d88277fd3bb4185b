"""Cheat: when max_in_flight writes are running, skips the checkpoint instead of waiting
for a slot: training never waits, but checkpoints go missing.

expect: wrong
failing: plausible, schedule
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
        writes = set()
        for step in range(start, self.config.num_steps):
            await self.model.train_step_async(self.batches[step])
            last = step + 1 == self.config.num_steps
            if (step + 1) % self.config.checkpoint_every == 0:
                writes = {w for w in writes if not w.done()}
                if len(writes) >= self.config.max_in_flight and not last:
                    continue
                if last:
                    while len(writes) >= self.config.max_in_flight:
                        _, writes = await asyncio.wait(
                            writes, return_when=asyncio.FIRST_COMPLETED)
                copy = await self.model.snapshot_async()
                writes.add(asyncio.create_task(self.storage.write_async(copy)))
        await asyncio.gather(*writes)
