"""In the reduce-scatter every worker forwards its own original chunk instead of the
running sum it just received and added to: each final chunk misses most workers.

expect: wrong
failing: sums
"""

import asyncio


class Trainer:
    def __init__(self, cluster):
        self.config = cluster.config
        self.workers = cluster.workers
        self.links = cluster.links

    async def allreduce(self, grads):
        n = len(self.workers)
        own = [g.split() for g in grads]
        chunks = [list(pieces) for pieces in own]

        async def reduce_hop(step, i):
            c, right = (i - step) % n, (i + 1) % n
            arrived = await self.links[i].send_async(own[i][c], to=right)  # stale
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

    async def communicate(self, queue):
        for _ in range(self.config.num_buckets):
            await self.allreduce(await queue.get())

    async def train(self):
        queue = asyncio.Queue()
        comm = asyncio.create_task(self.communicate(queue))
        for bucket in range(self.config.num_buckets):
            await queue.put(
                await asyncio.gather(*(w.backward_async(bucket) for w in self.workers))
            )
        await comm
