"""Cheat: reads the loaders' private straggle schedule to start the slow batches first.

expect: runtime_error
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
        slow = self.loaders[0]._slow  # private to the grader
        loads = [asyncio.create_task(self.loaders[0].load_async(i)) for i in sorted(slow)]
        await asyncio.gather(*loads)
        return 0
