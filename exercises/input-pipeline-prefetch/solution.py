"""Reference solution: several loader tasks fill an ordered, bounded prefetch buffer.

- A semaphore of ``max_prefetched`` slots is the memory bound: a loader takes a slot
  *before* it starts a load, and the trainer gives it back when the model takes the
  batch. Loads in flight and loaded batches waiting both count.
- One task per loader; each takes the next dataset index only once it holds a slot, so
  the lowest indices always get memory first and the buffer cannot fill with batches
  that wait on a straggler that has no slot (no deadlock).
- The ordered buffer is one future per index: loads finish in any order, the trainer
  awaits index 0, 1, 2, ... and so trains in dataset order.
- At the stop (or the end of the data) the loader tasks are cancelled and awaited:
  loads in flight stop and free their memory, and nothing loaded later is trained on.
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
        return trained
