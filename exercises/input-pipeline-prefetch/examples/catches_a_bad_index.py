"""The reference, after asking for the batch at index NaN and catching the error. A
value the simulation cannot take (NaN, a number too large, a list too long) raises a
ValueError or OverflowError at the call, which the program may catch like any bad
argument (before, the call could not be caught and the run ended as "the program ended
its own process").

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

    async def train(self):
        try:  # a bad argument is the program's to catch, as with any library
            await self.loaders[0].load_async(float("nan"))
        except ValueError as error:
            print("refused:", error)
        self.best = float("inf")
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
                self.slots.release()  # the model takes the batch: its memory is free
                await self.model.train_step_async(batch)
                trained += 1
                if trained % self.config.validate_every == 0:
                    loss = await self.validator.validate_async(self.model)
                    if self.should_stop(loss):
                        break
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        return trained
