"""Steps on the first N gradients but never cancels the stragglers: the next step hands
a straggling worker a second batch, and the last ones are still running at the end.

expect: wrong
failing: clean_shutdown, one_batch_per_worker
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
        tasks = [
            asyncio.create_task(worker.compute_gradient_async(self.model, self.data.next_batch()))
            for worker in self.workers
        ]
        arrivals = asyncio.as_completed(tasks)
        for _ in range(self.config.gradients_per_step):
            await self.buffer.add_async(await next(arrivals))
        await self.model.step_async(self.buffer)

    async def train(self):
        for _ in range(self.config.num_steps):
            await self.train_step()
        return await self.model.snapshot_async()
