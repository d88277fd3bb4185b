"""A correct ring all-reduce, but only after the whole backward pass: communication
never overlaps computation.

expect: too_slow
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
        for step in range(n - 1):
            sends = [
                self.links[i].send_async(chunks[i][(i - step) % n], to=(i + 1) % n)
                for i in range(n)
            ]
            arrived = await asyncio.gather(*sends)
            for i in range(n):
                right, c = (i + 1) % n, (i - step) % n
                chunks[right][c] = self.workers[right].add(chunks[right][c], arrived[i])
        for step in range(n - 1):
            sends = [
                self.links[i].send_async(chunks[i][(i + 1 - step) % n], to=(i + 1) % n)
                for i in range(n)
            ]
            arrived = await asyncio.gather(*sends)
            for i in range(n):
                chunks[(i + 1) % n][(i + 1 - step) % n] = arrived[i]
        for worker, pieces in zip(self.workers, chunks, strict=True):
            worker.set_gradient(pieces)

    async def train(self):
        buckets = []
        for bucket in range(self.config.num_buckets):
            buckets.append(
                await asyncio.gather(*(w.backward_async(bucket) for w in self.workers))
            )
        for grads in buckets:
            await self.allreduce(grads)
