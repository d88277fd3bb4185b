"""Cheat: reads the workers' gradient values from the kit's private state to sum them
without any message.

expect: runtime_error
"""


class Trainer:
    def __init__(self, cluster):
        self.config = cluster.config
        self.workers = cluster.workers

    async def train(self):
        values = [worker._gradients for worker in self.workers]
        print(len(values))
