"""The wire between the trusted grader and the candidate's process.

Standard library only: the candidate's process imports this module (and never torch).

Frames are a 4-byte big-endian length and a UTF-8 JSON object. Nothing is pickled, in
either direction. What the candidate's side sends is bounded here (frame size, nesting,
string and list lengths) and then checked field by field by the grader
(``runner.sim.host``), which treats every byte of it as untrusted input.

Values cross the boundary as JSON scalars, lists, ``{"$t": [...]}`` (a tuple) and
``{"$h": n}`` (a handle: a kit object that stays with the grader). The grader describes
a handle the first time it sends it: ``{"$h": n, "$c": "Worker", "$a": {...}}`` (its
class and the attributes that never change), and plain records such as the exercise's
config go by value: ``{"$o": "Config", "$a": {...}}``.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import socket
import struct

MAX_FRAME = 1 << 20  # bytes of one frame from the candidate's side
MAX_DEPTH = 8  # nesting of a value from the candidate's side
MAX_ITEMS = 4096  # items in one list, or calls in one frame
MAX_STRING = 16_384  # characters of one string from the candidate's side

_HEADER = struct.Struct(">I")


def _no_constant(name: str):
    raise ValueError(f"{name} is not allowed")


# One encoder and one decoder for every frame (json.dumps/loads with options build new
# ones per call, which costs as much as a small message).
_ENCODE = json.JSONEncoder(separators=(",", ":"), allow_nan=False).encode
_DECODE = json.JSONDecoder(parse_constant=_no_constant).decode


class ProtocolError(Exception):
    """The other side sent something that is not a valid frame or message."""


class Channel:
    """Length-prefixed JSON frames over a stream socket."""

    def __init__(self, sock: socket.socket, max_frame: int = MAX_FRAME) -> None:
        self.sock = sock
        self.max_frame = max_frame
        self._buffer = bytearray()
        # Asked when a receive times out: True while the other side is still working
        # (using CPU), so a slow machine is waited for and only a blocked peer times out.
        self.still_working = None
        self.last_frame = b""

    def send(self, message: dict) -> None:
        self.send_body(_ENCODE(message).encode())

    def send_body(self, data: bytes) -> None:
        """One frame whose body is already encoded."""
        self.sock.sendall(_HEADER.pack(len(data)) + data)

    def _fill(self, count: int) -> None:
        while len(self._buffer) < count:
            try:
                chunk = self.sock.recv(max(65536, count - len(self._buffer)))
            except TimeoutError:
                if self.still_working is not None and self.still_working():
                    continue
                raise
            if not chunk:
                raise EOFError("the other side closed the channel")
            self._buffer += chunk

    def recv(self) -> dict:
        self._fill(_HEADER.size)
        (length,) = _HEADER.unpack_from(self._buffer)
        if length > self.max_frame:
            raise ProtocolError(f"a frame of {length} bytes (at most {self.max_frame})")
        self._fill(_HEADER.size + length)
        end = _HEADER.size + length
        data = self._buffer[_HEADER.size : end]
        del self._buffer[:end]
        self.last_frame = data  # its bytes, as they came (a sealed frame is checked on them)
        try:
            message = _DECODE(data.decode())
        except (ValueError, UnicodeDecodeError) as exc:
            raise ProtocolError(f"a frame that is not JSON: {exc}") from None
        except RecursionError:  # the decoder's own bound on nesting (~1,000 levels)
            raise ProtocolError("a frame nested too deeply") from None
        if not isinstance(message, dict):
            raise ProtocolError("a frame that is not a JSON object")
        return message

    def has_buffered(self) -> bool:
        return bool(self._buffer)


SEAL_TAIL = len(b',"mac":"') + 64 + len(b'"}')  # what a sealed frame ends with


def unsealed(frame: bytes, key: bytes) -> str | None:
    """Why ``frame`` (a JSON object's bytes) is not sealed under ``key``, or None: it must
    end with a member ``"mac"`` holding the HMAC-SHA256 (hex) of the frame without it."""
    if len(frame) < SEAL_TAIL + 2 or not frame.endswith(b'"}'):
        return "an end frame without its seal"
    tail = bytes(frame[-SEAL_TAIL:])
    if not tail.startswith(b',"mac":"'):
        return "an end frame without its seal"
    body = bytes(frame[:-SEAL_TAIL]) + b"}"
    expected = hmac.new(key, body, hashlib.sha256).hexdigest().encode()
    if not hmac.compare_digest(tail[8:-2], expected):
        return "an end frame with a wrong seal: it was not written by the runtime"
    return None


def check_value(value, depth: int = 0) -> None:
    """Raise ProtocolError unless ``value`` is a bounded wire value (candidate side)."""
    if depth > MAX_DEPTH:
        raise ProtocolError("a value nested too deeply")
    if value is None or isinstance(value, bool | int | float):
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) > 1 << 62:
            raise ProtocolError("an integer too large")
        return
    if isinstance(value, str):
        if len(value) > MAX_STRING:
            raise ProtocolError("a string too long")
        return
    if isinstance(value, list):
        if len(value) > MAX_ITEMS:
            raise ProtocolError("a list too long")
        for item in value:
            check_value(item, depth + 1)
        return
    if isinstance(value, dict):
        if set(value) == {"$h"} and type(value["$h"]) is int:
            return
        if set(value) == {"$t"} and isinstance(value["$t"], list):
            check_value(value["$t"], depth + 1)
            return
    raise ProtocolError("a value of an unknown kind")
