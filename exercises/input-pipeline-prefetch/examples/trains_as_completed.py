"""Trains each batch as soon as its load finishes: fast, but stragglers are overtaken
and the model sees the batches out of order.

expect: wrong
failing: order
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

    async def load_loop(self, loader):
        while True:
            await self.slots.acquire()
            index = self.next_index
            if index >= self.dataset.num_batches:
                self.slots.release()
                return
            self.next_index += 1
            await self.done.put(await loader.load_async(index))

    async def train(self):
        self.slots = asyncio.Semaphore(self.config.max_prefetched)
        self.done = asyncio.Queue()
        self.next_index = 0
        tasks = [asyncio.create_task(self.load_loop(loader)) for loader in self.loaders]
        trained = 0
        try:
            for _ in range(self.dataset.num_batches):
                batch = await self.done.get()
                self.slots.release()
                await self.model.train_step_async(batch)
                trained += 1
                if trained % self.config.validate_every == 0 and self.should_stop(
                    await self.validator.validate_async(self.model)
                ):
                    break
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        return trained
