"""No semaphore: every micro-batch enters the pipeline at once.

expect: wrong
failing: activations_freed, in_flight
"""

import asyncio


class Trainer:
    def __init__(self, cluster):
        self.config = cluster.config
        self.stages = cluster.stages
        self.links = cluster.links
        self.microbatches = cluster.microbatches
        self.node_locks = [asyncio.Lock() for _ in self.stages]
        self.depth = asyncio.Semaphore(self.config.max_in_flight)

    async def run_microbatch(self, mb):
        if True:  # no limit on micro-batches in flight
            x = mb.inputs
            for k, stage in enumerate(self.stages):
                async with self.node_locks[k]:
                    x = await stage.forward_async(mb.id, x)
                if k < len(self.links):
                    x = await self.links[k].send_async(x, mb.id)
            grad = mb.loss_gradient(x)
            for k in reversed(range(len(self.stages))):
                async with self.node_locks[k]:
                    grad = await self.stages[k].backward_async(mb.id, grad)
                if k > 0:
                    grad = await self.links[k - 1].send_async(grad, mb.id)

    async def train(self):
        await asyncio.gather(*(self.run_microbatch(mb) for mb in self.microbatches))
