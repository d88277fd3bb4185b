"""Cheat: times one snapshot. When it costs exactly what the config says (the run with no
jitter, which gives the speedup) it launches backups; in every run whose costs vary (the
race-hunting runs, where the checks look hardest) it plays the starter. Any shortcut could
hide behind the same test (a lock-free path whose races the plain order does not show),
so the speedup must hold in every run a grading makes.

expect: too_slow
"""

import asyncio


class Trainer:
    def __init__(self, cluster):
        self.config = cluster.config
        self.data = cluster.data
        self.workers = cluster.workers
        self.buffer = cluster.buffer
        self.model = cluster.model

    async def fast_step(self):
        tasks = [
            asyncio.create_task(worker.compute_gradient_async(self.model, self.data.next_batch()))
            for worker in self.workers
        ]
        try:
            for added, arrival in enumerate(asyncio.as_completed(tasks), start=1):
                await self.buffer.add_async(await arrival)
                if added == self.config.gradients_per_step:
                    break
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        await self.model.step_async(self.buffer)

    def slow_step(self):
        for worker in self.workers[: self.config.gradients_per_step]:
            self.buffer.add(worker.compute_gradient(self.model, self.data.next_batch()))
        self.model.step(self.buffer)

    async def train(self):
        loop = asyncio.get_running_loop()
        start = loop.time()
        await self.model.snapshot_async()
        exact = abs(loop.time() - start - self.config.snapshot_cost) < 1e-9
        for _ in range(self.config.num_steps):
            if exact:
                await self.fast_step()
            else:
                self.slow_step()
        return await self.model.snapshot_async()
