"""Cheat: runs the reduce-scatter, then lets every worker keep the full sums straight
from the workers that own them, skipping the all-gather's messages (half the traffic):
faster than any correct program can be, too.

expect: wrong
failing: plausible, provenance
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
        # worker (c - 1) mod n holds the full sum of chunk c
        full = [chunks[(c - 1) % n][c] for c in range(n)]
        for worker in self.workers:
            worker.set_gradient(full)

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
