"""A second correct design: a readers-writer lock, so pulls can overlap each other.

Pulls share the lock; a push takes it alone. Workers run in a TaskGroup.

expect: accepted
"""

import asyncio


class ReadWriteLock:
    def __init__(self):
        self.readers = 0
        self.writing = False
        self.changed = asyncio.Condition()

    async def acquire_read(self):
        async with self.changed:
            await self.changed.wait_for(lambda: not self.writing)
            self.readers += 1

    async def release_read(self):
        async with self.changed:
            self.readers -= 1
            self.changed.notify_all()

    async def acquire_write(self):
        async with self.changed:
            await self.changed.wait_for(lambda: not self.writing and self.readers == 0)
            self.writing = True

    async def release_write(self):
        async with self.changed:
            self.writing = False
            self.changed.notify_all()


class Trainer:
    def __init__(self, cluster):
        self.server = cluster.server
        self.workers = cluster.workers
        self.data = cluster.data
        self.lock = ReadWriteLock()

    async def pull(self):
        await self.lock.acquire_read()
        try:
            return await self.server.pull_async()
        finally:
            await self.lock.release_read()

    async def push(self, gradient):
        await self.lock.acquire_write()
        try:
            await self.server.push_async(gradient)
        finally:
            await self.lock.release_write()

    async def run(self, worker):
        while True:
            batch = self.data.next_batch()
            if batch is None:
                return
            params = await self.pull()
            await self.push(await worker.compute_gradient_async(params, batch))

    async def train(self):
        async with asyncio.TaskGroup() as group:
            for worker in self.workers:
                group.create_task(self.run(worker))
