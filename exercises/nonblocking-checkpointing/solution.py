"""Reference solution: copy to host memory at the checkpoint step, write in the background.

- The copy (``snapshot_async``) is fast and taken between two steps, so the weights and
  the optimizer state in it are of the same step; the write reads the copy, never the
  live model, so training can go on meanwhile.
- Writes run as tasks, oldest first in a deque. Before a new copy, while
  ``max_in_flight`` writes are running, the oldest is awaited: host memory never holds
  more copies than that, and a failed write surfaces here.
- ``train()`` awaits every remaining write before it returns, so the checkpoint of the
  last step is complete.
- ``resume()`` restores the newest *complete* checkpoint: a crash leaves the write it
  interrupted incomplete.
"""

import asyncio
from collections import deque


class Trainer:
    def __init__(self, cluster):
        self.config = cluster.config
        self.batches = cluster.batches
        self.model = cluster.model
        self.storage = cluster.storage

    async def resume(self):
        complete = [c.step for c in self.storage.checkpoints() if c.complete]
        if not complete:
            return 0
        step = max(complete)
        await self.model.restore_async(await self.storage.read_async(step))
        return step

    async def train(self):
        start = await self.resume()
        writes = deque()
        try:
            for step in range(start, self.config.num_steps):
                await self.model.train_step_async(self.batches[step])
                if (step + 1) % self.config.checkpoint_every == 0:
                    while len(writes) >= self.config.max_in_flight:
                        await writes.popleft()
                    copy = await self.model.snapshot_async()
                    writes.append(asyncio.create_task(self.storage.write_async(copy)))
            while writes:
                await writes.popleft()
        finally:
            for write in writes:
                write.cancel()
