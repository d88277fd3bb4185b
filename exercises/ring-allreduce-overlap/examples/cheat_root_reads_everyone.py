"""Cheat: worker 0 sums the other workers' gradients without receiving them (they are
in the other workers' memory), then sends the sum back.

expect: wrong
failing: provenance
"""

import asyncio


class Trainer:
    def __init__(self, cluster):
        self.config = cluster.config
        self.workers = cluster.workers
        self.links = cluster.links

    async def allreduce(self, grads):
        root = self.workers[0]
        total = grads[0]
        for grad in grads[1:]:
            total = root.add(total, grad)
        root.set_gradient(total)
        for i in range(1, len(self.workers)):
            self.workers[i].set_gradient(await self.links[0].send_async(total, to=i))

    async def train(self):
        for bucket in range(self.config.num_buckets):
            grads = await asyncio.gather(*(w.backward_async(bucket) for w in self.workers))
            await self.allreduce(grads)
