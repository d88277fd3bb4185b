"""A second correct design: loader tasks put batches in a dict guarded by a Condition;
a semaphore taken before each load bounds the memory.

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

    async def load_loop(self, loader):
        while True:
            await self.slots.acquire()
            if self.next_index >= self.dataset.num_batches:
                self.slots.release()
                return
            index = self.next_index
            self.next_index += 1
            batch = await loader.load_async(index)
            async with self.ready:
                self.buffer[index] = batch
                self.ready.notify_all()

    async def take(self, index):
        async with self.ready:
            await self.ready.wait_for(lambda: index in self.buffer)
            return self.buffer.pop(index)

    async def train(self):
        self.slots = asyncio.Semaphore(self.config.max_prefetched)
        self.ready = asyncio.Condition()
        self.buffer = {}
        self.next_index = 0
        tasks = [asyncio.create_task(self.load_loop(loader)) for loader in self.loaders]
        trained = 0
        try:
            for index in range(self.dataset.num_batches):
                batch = await self.take(index)
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
