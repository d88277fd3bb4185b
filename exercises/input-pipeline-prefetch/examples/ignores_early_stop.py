"""A fast pipeline that validates but never stops early: it trains the whole dataset,
past the step where validation said stop.

expect: wrong
failing: early_stop
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
            batch = await loader.load_async(index)
            self.ready[index].set_result(batch)

    def start(self):
        self.slots = asyncio.Semaphore(self.config.max_prefetched)
        self.next_index = 0
        loop = asyncio.get_running_loop()
        self.ready = [loop.create_future() for _ in range(self.dataset.num_batches)]
        return [asyncio.create_task(self.load_loop(loader)) for loader in self.loaders]

    async def train(self):
        tasks = self.start()
        trained = 0
        try:
            for index in range(self.dataset.num_batches):
                batch = await self.ready[index]
                self.slots.release()
                await self.model.train_step_async(batch)
                trained += 1
                if trained % self.config.validate_every == 0:
                    self.should_stop(await self.validator.validate_async(self.model))
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        return trained
