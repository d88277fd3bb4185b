"""Keeps the reduction through worker 0, but overlaps it with the next buckets'
backward: worker 0's link still carries 2(N - 1) whole buckets per bucket.

expect: too_slow
"""

import asyncio


class Trainer:
    def __init__(self, cluster):
        self.config = cluster.config
        self.workers = cluster.workers
        self.links = cluster.links

    async def allreduce(self, grads):
        root = self.workers[0]
        total = grads[0]
        for i in range(1, len(self.workers)):
            total = root.add(total, await self.links[i].send_async(grads[i], to=0))
        root.set_gradient(total)
        for i in range(1, len(self.workers)):
            self.workers[i].set_gradient(await self.links[0].send_async(total, to=i))

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
