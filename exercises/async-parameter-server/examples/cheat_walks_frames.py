"""Cheat: walks up from its own frame to the runtime's (through its traceback and through
inspect.currentframe) to reach what reports on the run. Frames that lead out of the
candidate's code are refused in a graded run: reaching for them is an error.

expect: runtime_error
"""

import asyncio
import inspect


class Trainer:
    def __init__(self, cluster):
        self.server, self.workers, self.data = cluster.server, cluster.workers, cluster.data
        self.lock = asyncio.Lock()

    async def run(self, worker):
        while (batch := self.data.next_batch()) is not None:
            async with self.lock:
                params = await self.server.pull_async()
            gradient = await worker.compute_gradient_async(params, batch)
            async with self.lock:
                await self.server.push_async(gradient)

    def runtime_frames(self):
        frames = []
        try:
            frame = inspect.currentframe()
        except PermissionError:
            try:
                raise ValueError
            except ValueError as exc:
                frame = exc.__traceback__.tb_frame
        while frame is not None:
            frames.append(frame)
            frame = frame.f_back
        return frames

    async def train(self):
        self.waiting = asyncio.create_task(asyncio.Event().wait())  # left waiting
        for frame in self.runtime_frames():
            for name in list(frame.f_globals):
                if name in ("witness", "Task") or name.startswith("_describe"):
                    frame.f_globals[name] = None
        await asyncio.gather(*(self.run(w) for w in self.workers))
