"""Reference solution: a chunked ring all-reduce per bucket, overlapped with the
backward pass of the next buckets.

- The backward pass runs as its own task: bucket after bucket, every worker at once;
  each finished bucket goes into a queue.
- One communication task takes the buckets from the queue in order and all-reduces each
  with a ring: every worker splits its gradient into N chunks; in N - 1 reduce-scatter
  steps worker i sends a running sum to worker i + 1, which adds its own chunk; after
  them worker i holds the full sum of chunk i + 1; N - 1 all-gather steps pass the full
  sums around the ring.
- In every step each link sends one chunk and receives one, and only one bucket is on
  the links at a time, so no link ever carries two messages at once.
"""

import asyncio


class Trainer:
    def __init__(self, cluster):
        self.config = cluster.config
        self.workers = cluster.workers
        self.links = cluster.links

    async def ring_allreduce(self, grads):
        n = len(self.workers)
        chunks = [grad.split() for grad in grads]  # chunks[i][c]: on worker i

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

    async def backward(self, ready):
        for bucket in range(self.config.num_buckets):
            grads = await asyncio.gather(*(w.backward_async(bucket) for w in self.workers))
            await ready.put(grads)

    async def communicate(self, ready):
        for _ in range(self.config.num_buckets):
            await self.ring_allreduce(await ready.get())

    async def train(self):
        ready = asyncio.Queue()
        await asyncio.gather(self.backward(ready), self.communicate(ready))
