"""One writer task behind a queue of max_in_flight - 1: the copy is taken before the
queue has room, so while one copy is written and one waits, a third sits in host memory
(and one writer is slow besides).

expect: wrong
failing: in_flight
"""

import asyncio


class Trainer:
    def __init__(self, cluster):
        self.config = cluster.config
        self.batches = cluster.batches
        self.model = cluster.model
        self.storage = cluster.storage

    async def writer(self, queue):
        while (copy := await queue.get()) is not None:
            await self.storage.write_async(copy)

    async def train(self):
        complete = [c.step for c in self.storage.checkpoints() if c.complete]
        start = max(complete, default=0)
        if start:
            await self.model.restore_async(await self.storage.read_async(start))
        # one copy being written plus max_in_flight - 1 waiting
        queue = asyncio.Queue(maxsize=self.config.max_in_flight - 1)
        writer = asyncio.create_task(self.writer(queue))
        for step in range(start, self.config.num_steps):
            await self.model.train_step_async(self.batches[step])
            if (step + 1) % self.config.checkpoint_every == 0:
                await queue.put(await self.model.snapshot_async())
        await queue.put(None)
        await writer
