"""Half-conversion: one loader prefetches the next batch while the model trains (double
buffering). Correct, but the other loaders stay idle and every straggler still stalls
training.

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
        loader = self.loaders[0]
        total = self.dataset.num_batches
        trained = 0
        pending = asyncio.create_task(loader.load_async(0))
        try:
            for index in range(total):
                batch = await pending
                pending = None
                if index + 1 < total:
                    pending = asyncio.create_task(loader.load_async(index + 1))
                await self.model.train_step_async(batch)
                trained += 1
                if trained % self.config.validate_every == 0 and self.should_stop(
                    await self.validator.validate_async(self.model)
                ):
                    break
        finally:
            if pending is not None:
                pending.cancel()
                await asyncio.gather(pending, return_exceptions=True)
        return trained
