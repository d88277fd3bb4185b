"""Starts each bucket's ring all-reduce as a task as soon as its backward is done, with
nothing keeping two buckets apart. On the main cluster a ring takes exactly as long as a
backward, so one bucket's last message ends as the next bucket's first one starts (until
the costs vary a little); with three workers a ring outlasts a backward, and two
buckets' messages share a link.

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
        async with asyncio.TaskGroup() as group:
            for bucket in range(self.config.num_buckets):
                grads = await asyncio.gather(
                    *(w.backward_async(bucket) for w in self.workers)
                )
                group.create_task(self.allreduce(grads))
