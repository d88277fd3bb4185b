"""The queue-and-ring structure, but the backward pass uses the blocking call: every
worker's backward runs alone and nothing overlaps with it.

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

    async def communicate(self, queue):
        for _ in range(self.config.num_buckets):
            await self.allreduce(await queue.get())

    async def train(self):
        queue = asyncio.Queue()
        comm = asyncio.create_task(self.communicate(queue))
        for bucket in range(self.config.num_buckets):
            await queue.put([w.backward(bucket) for w in self.workers])
            await asyncio.sleep(0)
        await comm
