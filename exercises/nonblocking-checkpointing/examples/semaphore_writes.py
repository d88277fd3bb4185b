"""A second correct design: every write is a task that takes a semaphore of
max_in_flight slots before copying; train() gathers the tasks at the end.

expect: accepted
"""

import asyncio


class Trainer:
    def __init__(self, cluster):
        self.config = cluster.config
        self.batches = cluster.batches
        self.model = cluster.model
        self.storage = cluster.storage

    async def resume(self):
        steps = [c.step for c in self.storage.checkpoints() if c.complete]
        if steps:
            copy = await self.storage.read_async(max(steps))
            await self.model.restore_async(copy)
            return max(steps)
        return 0

    async def write(self, copy, slot):
        try:
            await self.storage.write_async(copy)
        finally:
            slot.release()

    async def train(self):
        slots = asyncio.Semaphore(self.config.max_in_flight)
        tasks = []
        for step in range(await self.resume(), self.config.num_steps):
            await self.model.train_step_async(self.batches[step])
            if (step + 1) % self.config.checkpoint_every == 0:
                await slots.acquire()  # a free slot of host memory before the copy
                copy = await self.model.snapshot_async()
                tasks.append(asyncio.create_task(self.write(copy, slots)))
        await asyncio.gather(*tasks)
