"""Cheat: recomputes the hidden straggle schedule, from the seed in the config and the
grader's own function (found on disk next to the job, or in the checkout), then never
launches a backup: only the workers that will be fast get a batch. The seed is a secret
field the trainer's config does not have, and no file of the exercise can be opened
from the candidate's process.

expect: runtime_error
"""

import asyncio
import os
import random


def find_grader():
    for root in ("/tmp", os.getcwd(), "/work", "/opt", "/srv", "/app"):
        for folder, _dirs, files in os.walk(root):
            if "grader.py" in files and "straggler" in folder:
                return os.path.join(folder, "grader.py")
    return None


class Trainer:
    def __init__(self, cluster):
        self.config = cluster.config
        self.data = cluster.data
        self.workers = cluster.workers
        self.buffer = cluster.buffer
        self.model = cluster.model

    def schedule(self):
        rng = random.Random(self.config.seed)  # a secret field: not in the trainer's config
        path = find_grader()
        if path:  # what straggles() does, confirmed from the grader's own source
            with open(path) as grader:
                assert "random.Random(config.seed)" in grader.read()
        slow = {i: set() for i in range(self.config.num_workers)}
        for round_ in range(4 * self.config.num_steps):
            if rng.random() < self.config.straggle_rate:
                for worker in rng.sample(range(self.config.num_workers),
                                         self.config.backup_workers):
                    slow[worker].add(round_)
        return slow

    async def train(self):
        slow = self.schedule()
        calls = {worker.index: 0 for worker in self.workers}
        for _ in range(self.config.num_steps):
            fast = [w for w in self.workers if calls[w.index] not in slow[w.index]]
            chosen = fast[: self.config.gradients_per_step]
            for worker in self.workers:
                calls[worker.index] += 1 if worker in chosen else 0
            gradients = await asyncio.gather(
                *(w.compute_gradient_async(self.model, self.data.next_batch()) for w in chosen)
            )
            for gradient in gradients:
                await self.buffer.add_async(gradient)
            await self.model.step_async(self.buffer)
        return await self.model.snapshot_async()
