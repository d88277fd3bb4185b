"""A correct variant: a set of write tasks; when it is full, asyncio.wait(...,
FIRST_COMPLETED) frees a slot.

expect: accepted
"""

import asyncio


class Trainer:
    def __init__(self, cluster):
        self.config = cluster.config
        self.batches = cluster.batches
        self.model = cluster.model
        self.storage = cluster.storage

    async def train(self):
        infos = [c for c in self.storage.checkpoints() if c.complete]
        start = max((c.step for c in infos), default=0)
        if start:
            await self.model.restore_async(await self.storage.read_async(start))
        pending = set()
        for step in range(start, self.config.num_steps):
            await self.model.train_step_async(self.batches[step])
            if (step + 1) % self.config.checkpoint_every:
                continue
            if len(pending) >= self.config.max_in_flight:
                done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    task.result()
            copy = await self.model.snapshot_async()
            pending.add(asyncio.create_task(self.storage.write_async(copy)))
        if pending:
            await asyncio.gather(*pending)
