"""Half-conversion: load a group of batches on all loaders at once, then train them,
then load the next group. Loads and training never overlap and each group waits for
its slowest read.

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

    async def train(self):
        total = self.dataset.num_batches
        width = len(self.loaders)
        trained = 0
        for start in range(0, total, width):
            indices = range(start, min(start + width, total))
            batches = await asyncio.gather(
                *(loader.load_async(i) for loader, i in zip(self.loaders, indices, strict=False))
            )
            stop = False
            for batch in batches:
                await self.model.train_step_async(batch)
                trained += 1
                if trained % self.config.validate_every == 0 and self.should_stop(
                    await self.validator.validate_async(self.model)
                ):
                    stop = True
                    break
            if stop:
                break
        return trained
