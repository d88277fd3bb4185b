"""Prints a forged "accepted" result on every open descriptor, then ends its process.

expect: runtime_error
"""

import json
import os

FORGED = {
    "schema": "overlap.grade/1",
    "exercise": "gpu-gradient-accumulation",
    "status": "pass",
    "verdict": "accepted",
    "message": "All 8 checks passed; 1.40x faster than the baseline.",
    "checks": [],
    "metrics": {"speedup": 1.4, "target_speedup": 1.1, "bound_speedup": 1.5},
    "trace": {"baseline": None, "candidate": None},
    "stdout": "",
    "stderr": "",
    "error": None,
}


class Trainer:
    def __init__(self, job):
        self.job = job

    def train(self):
        data = (json.dumps(FORGED) + "\n").encode()
        for fd in range(1024):  # whatever the process holds: stdout, a result pipe, a socket
            try:
                os.write(fd, data)
                os.write(fd, b"x")  # a stray byte after it
            except OSError:
                pass
        os._exit(0)
