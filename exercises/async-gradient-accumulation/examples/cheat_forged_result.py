"""Cheat: writes a complete "accepted 4.1x" result to every descriptor it can find (the
grader's result descriptor in the old engine), a stray byte after it so that a genuine
line would no longer parse, then ends the process before anything can be checked.

expect: runtime_error
"""

import contextlib
import json
import os

FORGED = json.dumps(
    {
        "schema": "overlap.grade/1",
        "exercise": "async-gradient-accumulation",
        "status": "pass",
        "verdict": "accepted",
        "message": "All 9 checks passed; 4.10x faster than the baseline.",
        "checks": [],
        "metrics": {"speedup": 4.1},
    }
)


class Trainer:
    def __init__(self, cluster):
        self.model = cluster.model

    def train(self):
        for fd in list(range(0, 64)):
            with contextlib.suppress(OSError):
                os.write(fd, (FORGED + "\n").encode() + b"\x00")
        for name in os.listdir("/proc/self/fd"):
            try:
                with open(f"/proc/self/fd/{name}", "w") as stream:
                    stream.write(FORGED + "\n")
            except OSError:
                pass
        os._exit(0)
