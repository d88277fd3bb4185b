"""Every batch starts at once: workers compute several batches at the same time.

expect: wrong
failing: in_flight, plausible
"""

import asyncio


class Trainer:
    def __init__(self, cluster):
        self.cluster = cluster

    async def train(self):
        workers = self.cluster.workers
        return list(
            await asyncio.gather(
                *(
                    workers[i % len(workers)].compute_gradient_async(self.cluster.model, batch)
                    for i, batch in enumerate(self.cluster.batches)
                )
            )
        )
