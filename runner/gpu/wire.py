"""Values between the GPU track's grader and its run processes (both sides use this).

Frames are ``runner.protocol.Channel``'s: a 4-byte length and a JSON object, nothing
pickled. Tensors travel as ``{"$x": dtype, "s": shape, "b": base64 of the raw
little-endian bytes}``; only three dtypes exist on the wire (float32, float64, int64), so
every tensor a run hands back is copied to the host and converted first.

Everything a run process sends is untrusted: :func:`decode` bounds the depth, the number
of items, string lengths and the total tensor bytes, checks that every tensor's bytes
match its shape, and raises :class:`WireError` otherwise. The grader treats that as the
candidate's failure ("broke the grader's protocol"), never as a pass.
"""

from __future__ import annotations

import base64
import binascii
import math
from dataclasses import dataclass

import torch

DTYPES = {"float32": torch.float32, "float64": torch.float64, "int64": torch.int64}
ITEMSIZE = {"float32": 4, "float64": 8, "int64": 8}
MAX_DEPTH = 6
MAX_ITEMS = 4096
MAX_STRING = 1 << 16
MAX_DIMS = 8
COMMIT_SMALL = 256  # returned tensors up to this many elements are committed in full


class WireError(ValueError):
    """A value from a run process that is not what the wire allows."""


@dataclass(frozen=True)
class Opaque:
    """Something a run returned that cannot cross the wire (an object of its own class):
    the grader sees only its type name."""

    type_name: str

    def __repr__(self) -> str:
        return f"<{self.type_name}>"


# -- the run process's side (encoding) ----------------------------------------------


def encode_tensor(tensor: torch.Tensor) -> dict:
    t = tensor.detach()
    if t.is_floating_point():
        t = t.to("cpu", torch.float64 if t.dtype == torch.float64 else torch.float32)
    elif t.is_complex():
        raise TypeError("complex tensors cannot be returned")
    else:
        t = t.to("cpu", torch.int64)
    t = t.contiguous()
    name = str(t.dtype).removeprefix("torch.")
    data = t.numpy().tobytes() if _has_numpy() else bytes(t.view(torch.uint8).flatten().tolist())
    return {"$x": name, "s": list(t.shape), "b": base64.b64encode(data).decode("ascii")}


_numpy: bool | None = None


def _has_numpy() -> bool:
    global _numpy
    if _numpy is None:
        try:
            torch.zeros(1).numpy()
            _numpy = True
        except Exception:
            _numpy = False
    return _numpy


def encode(value, depth: int = 0):
    """A returned value as wire data (tensors copied to the host)."""
    if depth > MAX_DEPTH:
        return {"$o": "a value nested too deeply"}
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        return value if abs(value) < 1 << 62 else float(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else {"$f": repr(value)}
    if isinstance(value, torch.Tensor):
        return encode_tensor(value)
    if isinstance(value, list | tuple):
        return [encode(v, depth + 1) for v in list(value)[:MAX_ITEMS]]
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {"$d": {k: encode(v, depth + 1) for k, v in list(value.items())[:MAX_ITEMS]}}
    return {"$o": type(value).__name__[:200]}


# -- the grader's side (decoding, untrusted input) ----------------------------------


class Budget:
    """Tensor bytes one message may carry in all."""

    def __init__(self, limit: int) -> None:
        self.left = limit

    def take(self, count: int) -> None:
        self.left -= count
        if self.left < 0:
            raise WireError("more tensor data than this run can produce")


def decode_tensor(value, budget: Budget, shape: tuple | None = None) -> torch.Tensor:
    if not isinstance(value, dict) or set(value) != {"$x", "s", "b"}:
        raise WireError("a tensor that is not {$x, s, b}")
    name, dims, data = value["$x"], value["s"], value["b"]
    if name not in DTYPES:
        raise WireError(f"a tensor of dtype {str(name)[:20]!r}")
    if (
        not isinstance(dims, list)
        or len(dims) > MAX_DIMS
        or not all(type(d) is int and 0 <= d < 1 << 40 for d in dims)
    ):
        raise WireError("a tensor shape that is not a short list of sizes")
    if shape is not None and tuple(dims) != tuple(shape):
        raise WireError(f"a tensor of shape {tuple(dims)}, not {tuple(shape)}")
    if not isinstance(data, str):
        raise WireError("tensor data that is not a string")
    count = math.prod(dims)
    size = count * ITEMSIZE[name]
    budget.take(size)
    if len(data) != 4 * ((size + 2) // 3):
        raise WireError("tensor data whose length does not match its shape")
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise WireError("tensor data that is not base64") from None
    if len(raw) != size:
        raise WireError("tensor data whose length does not match its shape")
    return torch.frombuffer(bytearray(raw), dtype=DTYPES[name]).reshape(dims).clone()


def decode(value, budget: Budget, depth: int = 0):
    """Wire data back into Python values and host tensors (see the module docstring)."""
    if depth > MAX_DEPTH:
        raise WireError("a value nested too deeply")
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        if abs(value) > 1 << 62:
            raise WireError("an integer too large")
        return value
    if isinstance(value, float):
        return value
    if isinstance(value, str):
        return string(value, MAX_STRING)
    if isinstance(value, list):
        if len(value) > MAX_ITEMS:
            raise WireError("a list too long")
        return [decode(v, budget, depth + 1) for v in value]
    if isinstance(value, dict):
        if "$x" in value:
            return decode_tensor(value, budget)
        if set(value) == {"$d"} and isinstance(value["$d"], dict):
            items = value["$d"]
            if len(items) > MAX_ITEMS:
                raise WireError("a dict too large")
            return {string(k, 200): decode(v, budget, depth + 1) for k, v in items.items()}
        if set(value) == {"$f"} and value["$f"] in ("nan", "inf", "-inf"):
            return float(value["$f"])
        if set(value) == {"$o"}:
            return Opaque(string(value["$o"], 200))
    raise WireError("a value of an unknown kind")


def string(value, limit: int) -> str:
    if not isinstance(value, str):
        raise WireError("a string expected")
    if len(value) > limit:
        raise WireError("a string too long")
    return value


def integer(value, low: int = 0, high: int = 1 << 40) -> int:
    if type(value) is not int or not low <= value <= high:
        raise WireError(f"an integer in {low}..{high} expected")
    return value


def number(value, *, finite: bool = False) -> float:
    if isinstance(value, dict) and set(value) == {"$f"} and not finite:
        return decode(value, Budget(0))
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise WireError("a number expected")
    if finite and not math.isfinite(value):
        raise WireError("a finite number expected")
    return float(value)


def encode_number(value: float):
    value = float(value)
    return value if math.isfinite(value) else {"$f": repr(value)}


# -- the commitment (see runner/gpu/worker.py) --------------------------------------


def commit_positions(seed: int, index: int, count: int) -> torch.Tensor:
    """Where the ``index``-th large returned tensor is sampled for the commitment."""
    generator = torch.Generator().manual_seed((seed * 1_000_003 + index) % (1 << 62))
    return torch.randint(0, count, (COMMIT_SMALL,), generator=generator)


def verify_commit(commit, full, seed: int) -> None:
    """Raise WireError unless ``full`` (the report's returned value, wire form) is what
    ``commit`` (sent when the clock stopped) promised."""
    counter = [0]
    budget = Budget(1 << 62)

    def walk(c, f, depth=0):
        if depth > MAX_DEPTH + 1:
            raise WireError("a commitment nested too deeply")
        if isinstance(f, dict) and "$x" in f:
            index = counter[0]
            counter[0] += 1
            tensor = decode_tensor(f, budget)
            flat = tensor.reshape(-1)
            if flat.numel() <= COMMIT_SMALL:
                if c != f:
                    raise WireError("a returned tensor that differs from the one committed")
                return
            if not isinstance(c, dict) or set(c) != {"$c"}:
                raise WireError("a returned tensor that was not committed")
            promised = decode_tensor(c["$c"], budget, (COMMIT_SMALL,))
            got = flat[commit_positions(seed, index, flat.numel())]
            if promised.dtype != got.dtype or not torch.equal(promised, got):
                raise WireError(
                    "returned weights that differ from what the run committed to when it "
                    "answered (it answered before its work was done)"
                )
            return
        if isinstance(f, list):
            if not isinstance(c, list) or len(c) != len(f):
                raise WireError("a returned value that differs from the one committed")
            for a, b in zip(c, f, strict=True):
                walk(a, b, depth + 1)
            return
        if isinstance(f, dict) and set(f) == {"$d"} and isinstance(f["$d"], dict):
            if (
                not isinstance(c, dict)
                or set(c) != {"$d"}
                or not isinstance(c["$d"], dict)
                or list(c["$d"]) != list(f["$d"])
            ):
                raise WireError("a returned value that differs from the one committed")
            for key in f["$d"]:
                walk(c["$d"][key], f["$d"][key], depth + 1)
            return
        if c != f:
            raise WireError("a returned value that differs from the one committed")

    walk(commit, full)
