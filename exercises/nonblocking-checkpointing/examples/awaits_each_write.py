"""Converted to async calls, but every write is awaited where it starts: training still
stops for the whole write.

expect: too_slow
"""


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
        for step in range(start, self.config.num_steps):
            await self.model.train_step_async(self.batches[step])
            if (step + 1) % self.config.checkpoint_every == 0:
                await self.storage.write_async(await self.model.snapshot_async())
