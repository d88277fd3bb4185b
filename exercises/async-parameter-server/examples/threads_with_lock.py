"""Each worker loop runs in a thread of its own; a threading.Lock makes every pull and
push whole and is never held across the computation. Correct, as with real threads.

expect: accepted
"""

import asyncio
import threading


class Trainer:
    def __init__(self, cluster):
        self.server, self.workers, self.data = cluster.server, cluster.workers, cluster.data
        self.lock = threading.Lock()

    def loop_in_thread(self, worker):
        while True:
            with self.lock:
                batch = self.data.next_batch()
                if batch is None:
                    return
                params = self.server.pull()
            gradient = worker.compute_gradient(params, batch)
            with self.lock:
                self.server.push(gradient)

    async def train(self):
        await asyncio.gather(*(asyncio.to_thread(self.loop_in_thread, w) for w in self.workers))
