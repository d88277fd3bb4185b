"""Async, but every batch goes to the first worker: correct, no faster.

expect: too_slow
"""


class Trainer:
    def __init__(self, cluster):
        self.cluster = cluster

    async def train(self):
        worker = self.cluster.workers[0]
        return [
            await worker.compute_gradient_async(self.cluster.model, batch)
            for batch in self.cluster.batches
        ]
