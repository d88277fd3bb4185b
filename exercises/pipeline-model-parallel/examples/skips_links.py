"""Hands tensors straight to the next stage instead of sending them over the link.

expect: wrong
failing: each_op_once, link_causality
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
        async with self.depth:
            x = mb.inputs
            for k, stage in enumerate(self.stages):
                async with self.node_locks[k]:
                    x = await stage.forward_async(mb.id, x)
                if k < len(self.links):
                    pass  # (no transfer)
            grad = mb.loss_gradient(x)
            for k in reversed(range(len(self.stages))):
                async with self.node_locks[k]:
                    grad = await self.stages[k].backward_async(mb.id, grad)
                if k > 0:
                    pass  # (no transfer)

    async def train(self):
        await asyncio.gather(*(self.run_microbatch(mb) for mb in self.microbatches))
