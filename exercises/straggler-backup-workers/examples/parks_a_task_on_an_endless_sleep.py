"""A task parked on ``asyncio.sleep(math.inf)`` until it is cancelled at the end, while
train() polls each step with ``sleep(0)``. Correct, and a real loop runs it: a timer at
infinity never fires. After 64 polls in a row the grader's clock moves to the next timer,
and one at infinity is no timer (it was a runtime error of the grader's own making:
"cannot convert float infinity to integer").

expect: accepted
"""
import asyncio
import math


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
        parked = asyncio.create_task(asyncio.sleep(math.inf))  # idles until cancelled
        for _ in range(self.config.num_steps):
            step = asyncio.create_task(self.train_step())
            while not step.done():  # polls (accepted: polling_done_flag, polls_buffer_length)
                await asyncio.sleep(0)
            step.result()
        parked.cancel()
        await asyncio.gather(parked, return_exceptions=True)
        return await self.model.snapshot_async()
