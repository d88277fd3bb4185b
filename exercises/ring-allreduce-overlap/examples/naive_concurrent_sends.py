"""Reduces through worker 0 with every send in flight at once: three messages arrive on
worker 0's incoming side at the same time, which one link cannot carry.

expect: wrong
failing: links
"""

import asyncio


class Trainer:
    def __init__(self, cluster):
        self.config = cluster.config
        self.workers = cluster.workers
        self.links = cluster.links

    async def allreduce(self, grads):
        n = len(self.workers)
        root = self.workers[0]
        arrived = await asyncio.gather(
            *(self.links[i].send_async(grads[i], to=0) for i in range(1, n))
        )
        total = grads[0]
        for piece in arrived:
            total = root.add(total, piece)
        root.set_gradient(total)
        copies = await asyncio.gather(
            *(self.links[0].send_async(total, to=i) for i in range(1, n))
        )
        for i, copy in enumerate(copies, start=1):
            self.workers[i].set_gradient(copy)

    async def train(self):
        comm = None
        for bucket in range(self.config.num_buckets):
            grads = await asyncio.gather(*(w.backward_async(bucket) for w in self.workers))
            if comm is not None:
                await comm
            comm = asyncio.create_task(self.allreduce(grads))
        await comm
