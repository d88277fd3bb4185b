"""The structure of the reference, but the loader tasks call the blocking load(): each
load stalls every task, so nothing overlaps.

expect: too_slow
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
            self.ready[index].set_result(loader.load(index))

    async def train(self):
        total = self.dataset.num_batches
        self.slots = asyncio.Semaphore(self.config.max_prefetched)
        self.next_index = 0
        loop = asyncio.get_running_loop()
        self.ready = [loop.create_future() for _ in range(total)]
        tasks = [asyncio.create_task(self.load_loop(loader)) for loader in self.loaders]
        trained = 0
        try:
            for index in range(total):
                batch = await self.ready[index]
                await self.model.train_step_async(batch)
                self.slots.release()
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
