"""Cheat: gives every load a deadline and skips the batches whose read straggles, so
the model never waits for a slow batch (and, short of data, it stops before the end).

expect: wrong
failing: every_batch_once, early_stop
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

    async def train(self):
        total = self.dataset.num_batches
        deadline = 2 * (self.config.read_cost + self.config.augment_cost)
        trained = 0
        for index in range(total):
            loader = self.loaders[index % len(self.loaders)]
            try:
                batch = await asyncio.wait_for(loader.load_async(index), deadline)
            except TimeoutError:
                continue  # a straggler: skip it
            await self.model.train_step_async(batch)
            trained += 1
            if trained % self.config.validate_every == 0 and self.should_stop(
                await self.validator.validate_async(self.model)
            ):
                break
        return trained
