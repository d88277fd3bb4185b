"""Starts every bucket's backward at once on each worker, as if the buckets did not
depend on each other: bucket 1's backward needs what flows out of bucket 0's.

expect: wrong
failing: dependencies
"""

import asyncio


class Trainer:
    def __init__(self, cluster):
        self.config = cluster.config
        self.workers = cluster.workers
        self.links = cluster.links

    async def allreduce(self, grads):
        n = len(self.workers)
        chunks = [g.split() for g in grads]

        async def reduce_hop(step, i):
            c, right = (i - step) % n, (i + 1) % n
            arrived = await self.links[i].send_async(chunks[i][c], to=right)
            chunks[right][c] = self.workers[right].add(chunks[right][c], arrived)

        async def gather_hop(step, i):
            c, right = (i + 1 - step) % n, (i + 1) % n
            chunks[right][c] = await self.links[i].send_async(chunks[i][c], to=right)

        for step in range(n - 1):
            await asyncio.gather(*(reduce_hop(step, i) for i in range(n)))
        for step in range(n - 1):
            await asyncio.gather(*(gather_hop(step, i) for i in range(n)))
        for worker, pieces in zip(self.workers, chunks, strict=True):
            worker.set_gradient(pieces)

    async def train(self):
        per_bucket = [
            asyncio.gather(*(w.backward_async(bucket) for w in self.workers))
            for bucket in range(self.config.num_buckets)
        ]
        for grads in per_bucket:
            await self.allreduce(await grads)
