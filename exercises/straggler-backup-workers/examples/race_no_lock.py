"""Worker tasks add to the buffer without a lock: gradients that finish together
overwrite each other, and steps average fewer than N.

expect: wrong
failing: accumulation, plausible
"""

import asyncio


class Trainer:
    def __init__(self, cluster):
        self.config = cluster.config
        self.data = cluster.data
        self.workers = cluster.workers
        self.buffer = cluster.buffer
        self.model = cluster.model

    async def train_step(self):
        quorum = asyncio.Event()
        added = 0

        async def contribute(worker, batch):
            nonlocal added
            gradient = await worker.compute_gradient_async(self.model, batch)
            if added < self.config.gradients_per_step:
                added += 1
                await self.buffer.add_async(gradient)
                if added == self.config.gradients_per_step:
                    quorum.set()

        tasks = [
            asyncio.create_task(contribute(worker, self.data.next_batch()))
            for worker in self.workers
        ]
        await quorum.wait()
        await asyncio.sleep(self.config.add_cost)  # let the last adds land
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self.model.step_async(self.buffer)

    async def train(self):
        for _ in range(self.config.num_steps):
            await self.train_step()
        return await self.model.snapshot_async()
