"""Stops after the reduce-scatter: every worker sets only the one chunk it holds the
full sum of, and the other chunks of its buckets never get their sum (and the run
ends sooner than a complete all-reduce can).

expect: wrong
failing: plausible, sums
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

        for step in range(n - 1):
            await asyncio.gather(*(reduce_hop(step, i) for i in range(n)))
        for i, worker in enumerate(self.workers):
            worker.set_gradient(chunks[i][(i + 1) % n])

    async def train(self):
        comm = None
        for bucket in range(self.config.num_buckets):
            grads = await asyncio.gather(*(w.backward_async(bucket) for w in self.workers))
            if comm is not None:
                await comm
            comm = asyncio.create_task(self.allreduce(grads))
        await comm
