"""Whatever bytes the candidate's process writes to the grader, the grading ends with a
verdict against the candidate, never with an internal error of ours (nor "accepted").

The candidate's side of the wire is untrusted code: its program can reach its own socket
and write any frame. Each case below does exactly that, as its first message, then waits
for the grader's answer.
"""

import json

import pytest

from runner.sim import grading

GA = "async-gradient-accumulation"

PROGRAM = '''
import struct


class Trainer:
    def __init__(self, cluster):
        self.cluster = cluster

    def train(self):
        runtime = type(self.cluster.model)._overlap_runtime
        sock = runtime.channel.sock
        body = {body!r}
        header = struct.pack(">I", {length})
        sock.sendall(header + body)
        if {close}:
            sock.close()
            return None
        runtime.channel.recv()  # the grader's answer, if it gives one
        return self.cluster.model
'''


def _frame(message) -> bytes:
    return json.dumps(message).encode()


HOSTILE = {
    "nested 100,000 deep": b"[" * 100_000 + b"]" * 100_000,
    "an object nested 100,000 deep": b'{"a":' * 100_000 + b"1" + b"}" * 100_000,
    "not UTF-8": b'{"k": "sync", "t": 0, "ops": [], "x": "\xff\xfe"}',
    "not an object": b"[1, 2, 3]",
    "an integer of 5,000 digits": b'{"k": "sync", "t": ' + b"9" * 5000 + b', "ops": []}',
    "NaN for a time": b'{"k": "sync", "t": NaN, "ops": []}',
    "a float past the largest": b'{"k": "sync", "t": 1e999, "ops": []}',
    "a float time": _frame({"k": "sync", "t": 1.5, "ops": []}),
    "an unknown kind": _frame({"k": "verdict", "t": 0, "ops": [], "v": "accepted"}),
    "a constructor called through a handle": _frame(
        {"k": "sync", "t": 0, "ops": [["c", 1, 1, "__init__", [], {}]], "until": None}),
    "a private attribute read": _frame(
        {"k": "call", "t": 0, "ops": [], "h": 1, "m": "_sim", "a": [], "kw": {},
         "mode": "get"}),
    "arguments nested too deep": _frame(
        {"k": "call", "t": 0, "ops": [], "h": 1, "m": "__repr__",
         "a": [[[[[[[[[[[1]]]]]]]]]]], "kw": {}, "mode": "get"}),
    "a keyword that is no name": _frame(
        {"k": "call", "t": 0, "ops": [], "h": 1, "m": "__repr__", "a": [],
         "kw": {"not a name": 1}, "mode": "get"}),
    "an end returning a handle never given": _frame(
        {"k": "end", "t": 0, "ops": [], "value": {"$h": 999_999}}),
    "an end claiming a grader's verdict": _frame(
        {"k": "end", "t": 0, "ops": [], "error": {"verdict": "accepted", "message": "ok"}}),
    "a stall that ends before it starts": _frame(
        {"k": "sync", "t": 10, "ops": [["s", 10, 5, "time.sleep", 1]], "until": None}),
}

# Bounds of one run's work: the candidate's error, named (not a protocol error: its own
# side queues that many when the program starts that many at once).
FLOODS = {
    "too many operations in one frame": _frame(
        {"k": "sync", "t": 0, "ops": [["n", "threading.Thread"]] * 5000, "until": None}),
}


@pytest.mark.parametrize("body", HOSTILE.values(), ids=HOSTILE.keys())
def test_a_hostile_frame_is_the_candidates_protocol_error(write_code, body):
    path = write_code(PROGRAM.format(body=body, length=len(body), close=False))
    result = grading.grade(GA, path, seeds=0)
    assert result["verdict"] == "runtime_error", result["message"]
    assert "protocol" in result["message"]


@pytest.mark.parametrize("body", FLOODS.values(), ids=FLOODS.keys())
def test_a_flooding_frame_is_the_candidates_error_naming_the_bound(write_code, body):
    path = write_code(PROGRAM.format(body=body, length=len(body), close=False))
    result = grading.grade(GA, path, seeds=0)
    assert result["verdict"] == "runtime_error", result["message"]
    assert "more than 4,096 kit operations at one instant" in result["message"]


@pytest.mark.parametrize(
    ("body", "length"),
    [(b'{"k": "sync"', 100), (b"", 0xFFFFFFFF), (b'{"k": "sync", "t": 0}', 1 << 21)],
    ids=["cut short", "a length of 4 GiB", "a length past the frame limit"],
)
def test_a_frame_cut_short_or_oversized_is_the_candidates_error(write_code, body, length):
    path = write_code(PROGRAM.format(body=body, length=length, close=True))
    result = grading.grade(GA, path, seeds=0)
    assert result["verdict"] == "runtime_error", result["message"]


PRINTS_WHAT_NO_DATABASE_STORES = '''
import sys


class Trainer:
    def __init__(self, cluster):
        self.cluster = cluster

    def train(self):
        print("out \\ud83d\\x00")
        print("err \\udfff", file=sys.stderr, end="")
        return "\\ud800\\x00"
'''


def test_text_a_database_cannot_store_reaches_the_result_only_as_u_fffd(write_code):
    """A lone surrogate or a NUL returned or printed: the result holds U+FFFD in their
    place (the platform stores it; PostgreSQL refuses both)."""
    path = write_code(PRINTS_WHAT_NO_DATABASE_STORES)
    result = grading.grade(GA, path, seeds=0)
    assert result["verdict"] == "wrong"
    assert result["stdout"] == "out \ufffd\ufffd\n" and result["stderr"] == "err \ufffd"
    text = json.dumps(result)
    assert "\\ud8" not in text and "\\udf" not in text and "\\u0000" not in text



CLOSES_AND_SPINS = '''
class Trainer:
    def __init__(self, cluster):
        self.cluster = cluster

    def train(self):
        type(self.cluster.model)._overlap_runtime.channel.sock.close()
        while True:
            pass
'''


def test_a_program_that_closes_its_channel_and_goes_on_is_a_runtime_error(write_code):
    """The grader kills it (after a moment to end by itself): that kill is ours, not the
    kernel's OOM killer's, so the verdict is not a memory limit."""
    result = grading.grade(GA, write_code(CLOSES_AND_SPINS), seeds=0)
    assert result["verdict"] == "runtime_error", result["message"]
    assert "closed its connection" in result["message"]


BLOCKS_FOR_REAL = '''
import os


class Trainer:
    def __init__(self, cluster):
        self.cluster = cluster

    def train(self):
        readable, _ = os.pipe()
        os.read(readable, 1)  # nobody ever writes: blocked in the kernel, not awaiting
        return self.cluster.model
'''


def test_a_program_blocked_for_real_is_told_it_stopped_answering(write_code):
    """Silent on an open channel for the grader's whole real-time wait: a timeout that
    says what happened, not a closed connection (the channel never closed)."""
    result = grading.grade(GA, write_code(BLOCKS_FOR_REAL), seeds=0)
    assert result["verdict"] == "timeout", result["message"]
    assert "stopped answering" in result["message"]

