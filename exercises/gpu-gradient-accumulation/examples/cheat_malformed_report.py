"""Finds its process's socket and sends the grader a frame far over the size limit.

expect: runtime_error
"""

import contextlib
import os
import struct


def sockets():
    found = []
    for name in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{name}").startswith("socket:"):
                found.append(int(name))
        except OSError:
            pass
    return found


class Trainer:
    def __init__(self, job):
        self.job = job

    def train(self):
        for fd in sockets():
            # a header announcing 2 GiB, then a forged answer that never ends
            with contextlib.suppress(OSError):
                os.write(fd, struct.pack(">I", 0x7FFF_FFFF) + b'{"op": "trained"' + b" " * 65536)
        os._exit(0)
