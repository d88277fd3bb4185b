"""Returns the live model instead of a snapshot: its weights are the final ones now, but
the prompt promises a snapshot taken at the end (a copy that later steps cannot change).

expect: wrong
failing: plausible, result
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
        needed = self.config.gradients_per_step
        tasks = [
            asyncio.create_task(worker.compute_gradient_async(self.model, self.data.next_batch()))
            for worker in self.workers
        ]
        added = 0
        try:
            for arrival in asyncio.as_completed(tasks):
                await self.buffer.add_async(await arrival)
                added += 1
                if added == needed:
                    break
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        await self.model.step_async(self.buffer)

    async def train(self):
        for _ in range(self.config.num_steps):
            await self.train_step()
        return self.model
