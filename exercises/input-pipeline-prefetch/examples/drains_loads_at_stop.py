"""Correct: at the stop, loaders are told to stop taking new batches and the loads in
flight are awaited to the end instead of being cancelled (slower to shut down, but no
task is left running and nothing loaded after the stop is trained on).

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
        while not self.stopping:
            await self.slots.acquire()
            index = self.next_index
            if self.stopping or index >= self.dataset.num_batches:
                self.slots.release()
                return
            self.next_index += 1
            self.ready[index].set_result(await loader.load_async(index))

    async def train(self):
        total = self.dataset.num_batches
        self.stopping = False
        self.slots = asyncio.Semaphore(self.config.max_prefetched)
        self.next_index = 0
        loop = asyncio.get_running_loop()
        self.ready = [loop.create_future() for _ in range(total)]
        tasks = [asyncio.create_task(self.load_loop(loader)) for loader in self.loaders]
        trained = 0
        for index in range(total):
            batch = await self.ready[index]
            self.slots.release()
            await self.model.train_step_async(batch)
            trained += 1
            if trained % self.config.validate_every == 0 and self.should_stop(
                await self.validator.validate_async(self.model)
            ):
                break
        self.stopping = True
        for _ in self.loaders:
            self.slots.release()  # wake loaders waiting for a slot so they see the flag
        await asyncio.gather(*tasks)
        return trained
