"""The fork server: ``python -m runner.candidate <control fd>``.

Started once per grading by the trusted grader (a fresh interpreter, standard library
only: it never imports torch or the kit). For every run the grader sends a ``fork``
request with one end of a new socket pair; this process forks a child that becomes the
candidate's process for that run and answers the child's pid. ``wait`` reaps a child and
answers how it ended. Forking from this warm parent costs about a millisecond; every
child starts from the same memory image, so runs are reproducible.

The child, before any candidate code runs: its own session, no standard streams, no
descriptor but its socket, a CPU-time limit (a program that stops yielding is killed by
the kernel, whatever the host's load), the OOM killer's first choice, and death with
this process.
"""

from __future__ import annotations

# Imported here, before any fork, so that children start warm (the executors are lazy
# attributes of concurrent.futures, and the process pool pulls in multiprocessing).
import concurrent.futures.process
import concurrent.futures.thread  # noqa: F401
import contextlib
import gc
import os
import random
import resource
import socket
import sys

from runner import forkserver, landlock
from runner.candidate import program
from runner.candidate.runtime import Runtime
from runner.protocol import Channel

CANDIDATE_MAX_FRAME = 64 << 20  # frames from the grader (trusted) may be large


def _child(sock: socket.socket, limits: dict) -> None:
    seal = limits.pop("seal", None)  # the run's key: it seals the end frame
    seal = bytes.fromhex(seal) if isinstance(seal, str) else None
    forkserver.confine(
        sock, int(limits.get("cpu_s", 5)), cpu=limits.get("cpu"), rlimits=limits.get("rlimits")
    )
    memory = limits.get("memory_bytes")
    if memory:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    # Nothing of the exercise (grader, reference, examples), the job or the checkout is
    # readable from here on; no signal reaches outside (where the kernel can say so).
    landlock.restrict(landlock.readable_system_paths())
    random.seed(0)
    channel = Channel(sock, max_frame=CANDIDATE_MAX_FRAME)
    runtime = Runtime(channel)
    try:
        hello = channel.recv()
        try:
            body = program.run(runtime, hello, seal)
        except BaseException as exc:  # the program's code broke into the runtime's end
            body = None
            for _ in range(3):  # its signal handler may fire once more before it is off
                try:
                    body = program.broken_end(runtime, exc, seal)
                    break
                except BaseException:  # try again: it is being switched off
                    continue
            if body is None:
                raise
        channel.send_body(body)
    finally:
        os._exit(0)


ADDR_NO_RANDOMIZE = 0x0040000
REEXECUTED = "OVERLAP_FORK_SERVER_REEXECUTED"


def _fixed_addresses() -> None:
    """Re-exec once with address-space randomisation off (where the kernel lets us).

    Builtin objects a program cannot re-hash (coroutines, functions, ``object()``) hash
    by address: a set of them iterates in an order that changed from process to process
    with the randomised layout, and with it the schedule and the speedup."""
    if os.environ.pop(REEXECUTED, None):
        return  # once only: a kernel may clear the flag across exec (a privileged exec)
    persona = forkserver._libc.personality(0xFFFFFFFF)
    if persona < 0 or persona & ADDR_NO_RANDOMIZE:
        return
    if forkserver._libc.personality(persona | ADDR_NO_RANDOMIZE) < 0:
        return  # refused (a container's seccomp profile): addresses stay randomised
    os.environ[REEXECUTED] = "1"
    os.execv(sys.executable, sys.orig_argv)


def main() -> None:
    _fixed_addresses()
    # Non-dumpable, and so are the runs it forks: a run's process (same uid) can neither
    # ptrace this server nor open its /proc files to change what later runs start from.
    forkserver.prctl(forkserver.PR_SET_DUMPABLE, 0)
    control = socket.socket(fileno=int(sys.argv[1]))
    # Every object made so far is the children's shared start: out of the collector's
    # reach, a full collection in a run neither walks them nor copies their pages.
    gc.freeze()
    forkserver.serve(control, _child, {"wait": forkserver.wait_status}, subreaper=True)


if __name__ == "__main__":
    main()
