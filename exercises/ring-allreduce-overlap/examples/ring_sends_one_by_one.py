"""A ring all-reduce overlapped with the backward pass, but each step's N messages are
sent one after the other instead of together: the links take turns instead of all
working at once.

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
            for i in range(n):
                c, right = (i - step) % n, (i + 1) % n
                arrived = await self.links[i].send_async(chunks[i][c], to=right)
                chunks[right][c] = self.workers[right].add(chunks[right][c], arrived)
        for step in range(n - 1):
            for i in range(n):
                c, right = (i + 1 - step) % n, (i + 1) % n
                chunks[right][c] = await self.links[i].send_async(chunks[i][c], to=right)
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
