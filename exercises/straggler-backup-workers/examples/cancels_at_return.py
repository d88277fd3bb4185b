"""The last step's stragglers are cancelled and awaited only after the final snapshot,
right before train() returns. Correct: on a real loop nothing is left running.

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

    async def gather_gradients(self):
        tasks = [
            asyncio.create_task(worker.compute_gradient_async(self.model, self.data.next_batch()))
            for worker in self.workers
        ]
        for added, arrival in enumerate(asyncio.as_completed(tasks), start=1):
            await self.buffer.add_async(await arrival)
            if added == self.config.gradients_per_step:
                break
        return tasks

    async def train(self):
        for _ in range(self.config.num_steps - 1):
            tasks = await self.gather_gradients()
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await self.model.step_async(self.buffer)
        stragglers = await self.gather_gradients()
        await self.model.step_async(self.buffer)
        snapshot = await self.model.snapshot_async()
        for task in stragglers:
            task.cancel()
        await asyncio.gather(*stragglers, return_exceptions=True)
        return snapshot
