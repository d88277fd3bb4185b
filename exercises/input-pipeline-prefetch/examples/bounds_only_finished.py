"""Deadlock: the slot is taken after the load, before the batch goes in the buffer.
Loaders that ran ahead hold every slot with later batches, while the batch the model
waits for is loaded but can never get a slot.

expect: timeout
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
        while self.next_index < self.dataset.num_batches:
            index = self.next_index
            self.next_index += 1
            batch = await loader.load_async(index)
            await self.slots.acquire()
            self.ready[index].set_result(batch)

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
