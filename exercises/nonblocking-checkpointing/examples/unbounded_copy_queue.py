"""max_in_flight writer tasks take host copies from an unbounded queue: at most
max_in_flight writes run at once, but training never waits, so copies pile up in host
memory beyond max_in_flight.

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
        while True:
            copy = await queue.get()
            if copy is None:
                return
            await self.storage.write_async(copy)

    async def train(self):
        start = 0
        complete = [c.step for c in self.storage.checkpoints() if c.complete]
        if complete:
            start = max(complete)
            self.model.restore(self.storage.read(start))  # before training: nothing to overlap
        queue = asyncio.Queue()
        writers = [asyncio.create_task(self.writer(queue))
                   for _ in range(self.config.max_in_flight)]
        for step in range(start, self.config.num_steps):
            await self.model.train_step_async(self.batches[step])
            if self.model.step % self.config.checkpoint_every == 0:
                queue.put_nowait(await self.model.snapshot_async())
        for _ in writers:
            queue.put_nowait(None)
        await asyncio.gather(*writers)
