"""Cheat: finds the grader's process (its fork server's parent, from /proc) and lowers the
grader's limits and priority, hoping to make it fail, or slow, for everyone after it. The
program runs under a user of its own where the grader can make one (the call is refused);
where it shares the grader's user, the grader notices what changed. Either way the run
is an error, never a pass and never the platform's fault.

expect: runtime_error
"""

import asyncio
import os
import resource


def grader_pid():
    with open(f"/proc/{os.getppid()}/stat") as stat:
        return int(stat.read().rpartition(")")[2].split()[1])


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

    async def train(self):
        grader = grader_pid()
        os.setpriority(os.PRIO_PROCESS, grader, 19)
        _soft, hard = resource.prlimit(grader, resource.RLIMIT_NOFILE)
        resource.prlimit(grader, resource.RLIMIT_NOFILE, (16, hard))
        await asyncio.gather(*(self.run(w) for w in self.workers))
