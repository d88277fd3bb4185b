"""The reference's training, but train() returns NaN instead of the number of batches
trained. A value the grader cannot compare is still only a wrong answer: the `result`
check fails and says what came back (before, the run ended as "the program ended its own
process", since NaN cannot cross the wire).

expect: wrong
failing: result
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
        return float("nan")  # instead of trained
