"""A second correct design: worker tasks add under a lock until N are in, then the rest
are cancelled.

expect: accepted
"""

import asyncio


class Trainer:
    def __init__(self, cluster):
        self.config = cluster.config
        self.data = cluster.data
        self.workers = cluster.workers
        self.buffer = cluster.buffer
        self.model = cluster.model
        self.lock = asyncio.Lock()

    async def contribute(self, worker, batch, quorum):
        gradient = await worker.compute_gradient_async(self.model, batch)
        async with self.lock:
            if quorum.is_set():
                return  # too late: the step has its N gradients
            await self.buffer.add_async(gradient)
            if len(self.buffer) == self.config.gradients_per_step:
                quorum.set()

    async def train_step(self):
        quorum = asyncio.Event()
        tasks = [
            asyncio.create_task(self.contribute(worker, self.data.next_batch(), quorum))
            for worker in self.workers
        ]
        await quorum.wait()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self.model.step_async(self.buffer)

    async def train(self):
        for _ in range(self.config.num_steps):
            await self.train_step()
        return await self.model.snapshot_async()
