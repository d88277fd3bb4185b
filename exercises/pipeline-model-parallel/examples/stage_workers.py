"""A second correct design: one worker task per stage, fed by a priority queue.

Each stage serves its queue one operation at a time (so no lock is needed), and
prefers backward work, which frees memory sooner (1F1B-like). A semaphore keeps
at most ``max_in_flight`` micro-batches inside the pipeline.

expect: accepted
"""

import asyncio

FORWARD, BACKWARD = 1, 0  # lower runs first


class Trainer:
    def __init__(self, cluster):
        self.config = cluster.config
        self.stages = cluster.stages
        self.links = cluster.links
        self.microbatches = cluster.microbatches
        self.inbox = [asyncio.PriorityQueue() for _ in self.stages]
        self.depth = asyncio.Semaphore(self.config.max_in_flight)
        self.finished = 0
        self.all_done = asyncio.Event()

    async def feed(self):
        for mb in self.microbatches:
            await self.depth.acquire()
            self.inbox[0].put_nowait((FORWARD, mb.id, mb, mb.inputs))

    async def serve(self, k):
        stage, last = self.stages[k], len(self.stages) - 1
        while True:
            kind, _, mb, tensor = await self.inbox[k].get()
            if kind == FORWARD:
                y = await stage.forward_async(mb.id, tensor)
                if k < last:
                    y = await self.links[k].send_async(y, mb.id)
                    self.inbox[k + 1].put_nowait((FORWARD, mb.id, mb, y))
                else:
                    self.inbox[k].put_nowait((BACKWARD, mb.id, mb, mb.loss_gradient(y)))
            else:
                grad = await stage.backward_async(mb.id, tensor)
                if k > 0:
                    grad = await self.links[k - 1].send_async(grad, mb.id)
                    self.inbox[k - 1].put_nowait((BACKWARD, mb.id, mb, grad))
                else:
                    self.depth.release()
                    self.finished += 1
                    if self.finished == len(self.microbatches):
                        self.all_done.set()

    async def train(self):
        servers = [asyncio.create_task(self.serve(k)) for k in range(len(self.stages))]
        feeder = asyncio.create_task(self.feed())
        await self.all_done.wait()
        await feeder
        for server in servers:
            server.cancel()
        await asyncio.gather(*servers, return_exceptions=True)
