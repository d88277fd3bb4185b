"""Reference solution: backup workers. Every step launches one computation per worker,
adds the first N gradients to arrive, then cancels the stragglers and steps.

- One task per worker and batch; ``asyncio.as_completed`` hands the gradients over in
  the order they finish.
- Only this loop adds to the buffer, one gradient at a time, so adds never overlap.
- Once N are in, the remaining computations are cancelled *and awaited*: their workers
  are free for the next step, and no late (stale) gradient can reach the buffer.
- The optimizer step then runs on exactly N fresh gradients.
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
                gradient = await arrival
                await self.buffer.add_async(gradient)
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
        return await self.model.snapshot_async()
