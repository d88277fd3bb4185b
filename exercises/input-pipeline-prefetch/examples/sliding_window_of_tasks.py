"""A third correct design: the trainer keeps a window of M load tasks, one per batch;
each borrows an idle loader from a queue of loaders, and the window slides as the model
takes batches. Leftover tasks are cancelled at the stop.

expect: accepted
"""

import asyncio


class Trainer:
    def __init__(self, cluster):
        self.config = cluster.config
        self.dataset = cluster.dataset
        self.loaders = cluster.loaders
        self.model = cluster.model
        self.validator = cluster.validator
        self.best = float("inf")

    def should_stop(self, loss):
        if loss >= self.best:
            return True
        self.best = loss
        return False

    async def load(self, index):
        loader = await self.idle.get()
        try:
            return await loader.load_async(index)
        finally:
            self.idle.put_nowait(loader)

    async def train(self):
        self.idle = asyncio.Queue()
        for loader in self.loaders:
            self.idle.put_nowait(loader)
        total = self.dataset.num_batches
        window = self.config.max_prefetched
        tasks = {}
        trained = 0
        try:
            for index in range(min(window, total)):
                tasks[index] = asyncio.create_task(self.load(index))
            for index in range(total):
                batch = await tasks.pop(index)
                if index + window < total:
                    tasks[index + window] = asyncio.create_task(self.load(index + window))
                await self.model.train_step_async(batch)
                trained += 1
                if trained % self.config.validate_every == 0 and self.should_stop(
                    await self.validator.validate_async(self.model)
                ):
                    break
        finally:
            for task in tasks.values():
                task.cancel()
            await asyncio.gather(*tasks.values(), return_exceptions=True)
        return trained
