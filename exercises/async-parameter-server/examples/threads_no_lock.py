"""Each worker loop runs in a thread of its own with the blocking pull, compute and push,
and no lock: real threads would lose pushes and tear pulls, and so do these.

expect: wrong
failing: no_lost_updates, no_torn_reads
"""

import asyncio


class Trainer:
    def __init__(self, cluster):
        self.server, self.workers, self.data = cluster.server, cluster.workers, cluster.data

    def loop_in_thread(self, worker):
        while (batch := self.data.next_batch()) is not None:
            params = self.server.pull()
            gradient = worker.compute_gradient(params, batch)
            self.server.push(gradient)

    async def train(self):
        await asyncio.gather(*(asyncio.to_thread(self.loop_in_thread, w) for w in self.workers))
