"""Every bucket's ring all-reduce runs as its own task as soon as its backward is done;
a lock per link side keeps two buckets off one link at a time. Correct.

expect: accepted
"""

import asyncio


class Trainer:
    def __init__(self, cluster):
        self.config = cluster.config
        self.workers = cluster.workers
        self.links = cluster.links
        n = len(self.workers)
        self.out_locks = [asyncio.Lock() for _ in range(n)]
        self.in_locks = [asyncio.Lock() for _ in range(n)]

    async def send(self, i, piece, to):
        async with self.out_locks[i], self.in_locks[to]:
            return await self.links[i].send_async(piece, to=to)

    async def allreduce(self, grads):
        n = len(self.workers)
        chunks = [g.split() for g in grads]

        async def reduce_hop(step, i):
            c, right = (i - step) % n, (i + 1) % n
            arrived = await self.send(i, chunks[i][c], right)
            chunks[right][c] = self.workers[right].add(chunks[right][c], arrived)

        async def gather_hop(step, i):
            c, right = (i + 1 - step) % n, (i + 1) % n
            chunks[right][c] = await self.send(i, chunks[i][c], right)

        for step in range(n - 1):
            await asyncio.gather(*(reduce_hop(step, i) for i in range(n)))
        for step in range(n - 1):
            await asyncio.gather(*(gather_hop(step, i) for i in range(n)))
        for worker, pieces in zip(self.workers, chunks, strict=True):
            worker.set_gradient(pieces)

    async def train(self):
        pending = []
        for bucket in range(self.config.num_buckets):
            grads = await asyncio.gather(*(w.backward_async(bucket) for w in self.workers))
            pending.append(asyncio.create_task(self.allreduce(grads)))
        await asyncio.gather(*pending)
