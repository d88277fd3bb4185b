"""Fire and forget: each bucket's all-reduce is started as a task nobody awaits, so
train() returns while the last buckets are still on the links (sooner than a
complete all-reduce can end).

expect: wrong
failing: clean_shutdown, plausible, sums
"""

import asyncio


class Trainer:
    def __init__(self, cluster):
        self.config = cluster.config
        self.workers = cluster.workers
        self.links = cluster.links
        self.lock = asyncio.Lock()

    async def allreduce(self, grads):
        n = len(self.workers)
        async with self.lock:
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
        self.tasks = []
        for bucket in range(self.config.num_buckets):
            grads = await asyncio.gather(*(w.backward_async(bucket) for w in self.workers))
            self.tasks.append(asyncio.create_task(self.allreduce(grads)))
