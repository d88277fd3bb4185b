"""Grader: ring all-reduce, overlapped with the backward pass.

N data-parallel workers each run the backward pass bucket by bucket (bucket 0 holds the
last layers, so it is ready first) and must end with the sum of everyone's gradient of
every bucket. Every worker has one full-duplex link to a switch: its outgoing side
carries one message at a time, so does its incoming side, and a message costs
`latency + size / bandwidth`. The starter gathers every bucket on worker 0 and sends the
sum back (worker 0's link carries 2(N-1) whole buckets); a ring carries 2(N-1) chunks of
1/N of a bucket on every link at once, and can run while the next bucket's backward is
computed.

The kit below follows data: every gradient piece (`Grad`) knows its holder (the worker
whose memory it is in) and its sources (whose gradients it sums). A link delivers a copy
held by the receiver; `add`, `send` and `set_gradient` on a piece held by another worker
are recorded, never refused, and fail `provenance` (that is reading another GPU's memory
without a transfer).

Checks (each on every run, plain and shuffled):
- sums               every worker set, for every bucket and chunk, the sum of all N
                     workers' gradients, held by itself; the values equal the grader's own
                     sum exactly (the gradients are multiples of 1/8, so float64 sums are
                     exact in any order)
- provenance         no worker summed, sent or kept a piece held by another worker
- links              a link carries one message at a time, each way
- dependencies       every worker ran each bucket's backward once, in bucket order, one
                     after the other; every message carried data after the backward that
                     produced it had finished
(+ clean_shutdown, plausible, blocking_calls, threads from the framework)
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import torch

from runner.sdk import Check, Exercise, Scenario, block_on, busy_on
from runner.sim import Cluster
from runner.sim.core import Sim, Surface

CHUNK_VALUES = 2  # float64 values in one chunk (a chunk stands for `chunk_mb` megabytes)


@dataclass(frozen=True)
class Config:
    num_workers: int = 4
    num_buckets: int = 4
    bucket_mb: float = 64.0  # the size of one bucket's gradient
    # simulated costs
    backward_cost: float = 0.15  # seconds, one bucket's backward on one worker
    latency: float = 0.005  # seconds, every message
    bandwidth: float = 800.0  # MB/s, each way, on every worker's link

    @property
    def chunks_per_bucket(self) -> int:
        return self.num_workers

    @property
    def chunk_mb(self) -> float:
        return self.bucket_mb / self.num_workers


class Grad:
    """A piece of one bucket's gradient, in one worker's memory.

    ``bucket``; ``chunks``: the chunk indices it covers (a whole bucket covers
    ``0 .. num_workers - 1``); ``holder``: the worker whose memory holds it; ``sources``:
    the workers whose gradients it sums (sorted); ``size_mb``: what sending it carries.
    ``split()`` (free) returns one ``Grad`` per chunk, on the same worker.
    """

    KIT_SURFACE = Surface(const=("bucket", "chunks", "holder", "sources", "size_mb"),
                          free=("split",))

    def __init__(self, bucket: int, chunks: tuple[int, ...], holder: int,
                 sources: tuple[int, ...], values: torch.Tensor, chunk_mb: float,
                 ready: int) -> None:
        self.bucket = bucket
        self.chunks = chunks
        self.holder = holder
        self.sources = sources
        self.values = values  # (len(chunks), CHUNK_VALUES): stays in the grader
        self.size_mb = chunk_mb * len(chunks)
        self.ready = ready  # tick: the latest backward end among its sources
        self.chunk_mb = chunk_mb

    def __repr__(self) -> str:
        return (f"Grad(bucket={self.bucket}, chunks={list(self.chunks)}, "
                f"holder={self.holder}, sources={list(self.sources)})")

    @property
    def label(self) -> str:
        if len(self.chunks) == 1:
            return f"b{self.bucket}.c{self.chunks[0]}"
        return f"b{self.bucket}"

    def _like(self, *, holder=None, sources=None, values=None, chunks=None, ready=None):
        return Grad(
            self.bucket,
            self.chunks if chunks is None else chunks,
            self.holder if holder is None else holder,
            self.sources if sources is None else sources,
            self.values if values is None else values,
            self.chunk_mb,
            self.ready if ready is None else ready,
        )

    def split(self) -> list[Grad]:
        return [
            self._like(chunks=(chunk,), values=self.values[i : i + 1].clone())
            for i, chunk in enumerate(self.chunks)
        ]


def _grad(value, what: str) -> Grad:
    if not isinstance(value, Grad):
        hint = " (did you forget `await`?)" if hasattr(value, "__await__") else ""
        raise TypeError(f"{what} must be a Grad, got {type(value).__name__}{hint}")
    return value


class Replica:
    """One data-parallel worker (a GPU with its copy of the model).

    ``backward(bucket)`` runs the backward pass of one bucket's layers and returns this
    worker's gradient of it (a ``Grad`` of the whole bucket); buckets come in order,
    bucket 0 first (it holds the last layers), one at a time. ``add(a, b)`` (free) sums
    two pieces of the same bucket and chunks that this worker holds.
    ``set_gradient(grad)`` (free) writes an all-reduced gradient into this worker's
    parameters: a whole bucket, or a list of its chunks.
    """

    KIT_SURFACE = Surface(
        const=("index", "lane", "backward_cost"),
        free=("add", "set_gradient"),
        block=("backward",),
        async_=("backward_async",),
    )

    def __init__(self, sim: Sim, index: int, config: Config, gradients: torch.Tensor) -> None:
        self._sim = sim
        self.index = index
        self.lane = f"worker {index}"
        self.backward_cost = config.backward_cost
        self._config = config
        self._gradients = gradients  # (buckets, chunks, CHUNK_VALUES)
        # the grader's records
        self.kept: dict[tuple[int, int], Grad] = {}  # (bucket, chunk) -> what was set
        self.violations: list[str] = []

    def __repr__(self) -> str:
        return f"Replica({self.index})"

    def _bucket(self, bucket) -> int:
        if not isinstance(bucket, int) or not 0 <= bucket < self._config.num_buckets:
            raise ValueError(
                f"bucket must be an int in 0..{self._config.num_buckets - 1}, got {bucket!r}"
            )
        return bucket

    def _produce(self, bucket: int) -> Grad:
        chunks = tuple(range(self._config.chunks_per_bucket))
        return Grad(bucket, chunks, self.index, (self.index,),
                    self._gradients[bucket].clone(), self._config.chunk_mb, 0)

    def backward(self, bucket: int) -> Grad:
        grad = self._produce(self._bucket(bucket))
        self._sim.block(self.lane, "backward", self.backward_cost, f"b{bucket}",
                        call="Replica.backward")
        grad.ready = self._sim.ticks()
        return grad

    async def backward_async(self, bucket: int) -> Grad:
        grad = self._produce(self._bucket(bucket))
        await self._sim.busy(self.lane, "backward", self.backward_cost, f"b{bucket}")
        grad.ready = self._sim.ticks()
        return grad

    def _held(self, grad: Grad, what: str) -> None:
        if grad.holder != self.index:
            self.violations.append(
                f"Worker {self.index} {what} {grad.label} held by worker {grad.holder}: "
                "a worker only reads what is in its own memory; the piece must cross a "
                "link to it first."
            )

    def add(self, a: Grad, b: Grad) -> Grad:
        a, b = _grad(a, "Replica.add(a, b): a"), _grad(b, "Replica.add(a, b): b")
        if a.bucket != b.bucket or a.chunks != b.chunks:
            raise ValueError(
                f"Replica.add: {a.label} and {b.label} are different pieces "
                "(add pieces of the same bucket and chunks)"
            )
        self._held(a, "added")
        self._held(b, "added")
        return a._like(
            holder=self.index,
            sources=tuple(sorted(a.sources + b.sources)),
            values=a.values + b.values,
            ready=max(a.ready, b.ready),
        )

    def set_gradient(self, grad) -> None:
        pieces = list(grad) if isinstance(grad, list | tuple) else [grad]
        for piece in pieces:
            piece = _grad(piece, "Replica.set_gradient(grad)")
            self._held(piece, "kept")
            for i, chunk in enumerate(piece.chunks):
                self.kept[(piece.bucket, chunk)] = piece._like(
                    chunks=(chunk,), values=piece.values[i : i + 1].clone()
                )


class NetLink:
    """A worker's full-duplex link to the switch.

    ``send(grad, to)`` carries ``grad`` (held by this link's worker) to worker ``to`` and
    returns the copy that arrived there (held by ``to``). A message takes ``latency +
    grad.size_mb / bandwidth`` seconds and occupies this link's outgoing side and the
    receiver's incoming side: each side carries one message at a time.
    """

    KIT_SURFACE = Surface(
        const=("index", "latency", "bandwidth", "out_lane", "in_lane"),
        free=("cost",),
        block=("send",),
        async_=("send_async",),
    )

    def __init__(self, sim: Sim, index: int, config: Config, messages: list) -> None:
        self._sim = sim
        self.index = index
        self.latency = config.latency
        self.bandwidth = config.bandwidth
        self.out_lane = f"link {index} out"
        self.in_lane = f"link {index} in"
        self._workers = config.num_workers
        self.violations: list[str] = []
        self.messages = messages  # (start tick, from, to, Grad): shared by every link

    def __repr__(self) -> str:
        return f"NetLink({self.index})"

    def cost(self, grad) -> float:
        """Seconds to carry ``grad`` (free)."""
        return self.latency + _grad(grad, "NetLink.cost(grad)").size_mb / self.bandwidth

    def _start(self, grad, to) -> Grad:
        grad = _grad(grad, "NetLink.send(grad, to)")
        if not isinstance(to, int) or not 0 <= to < self._workers or to == self.index:
            raise ValueError(
                f"link {self.index}: `to` must be another worker's index "
                f"(0..{self._workers - 1}, not {self.index}), got {to!r}"
            )
        if grad.holder != self.index:
            self.violations.append(
                f"Link {self.index} sent {grad.label} held by worker {grad.holder}: a link "
                "sends only what is in its own worker's memory."
            )
        self.messages.append((self._sim.ticks(), self.index, to, grad))
        return grad

    def send(self, grad: Grad, to: int) -> Grad:
        grad = self._start(grad, to)
        block_on(self._sim, self._lanes(to), "send", self.cost(grad), self._label(grad, to),
                 call="NetLink.send")
        return grad._like(holder=to, values=grad.values.clone())

    async def send_async(self, grad: Grad, to: int) -> Grad:
        grad = self._start(grad, to)
        await busy_on(self._sim, self._lanes(to), "send", self.cost(grad),
                      self._label(grad, to))
        return grad._like(holder=to, values=grad.values.clone())

    def _lanes(self, to: int) -> tuple[str, str]:
        return self.out_lane, f"link {to} in"

    def _label(self, grad: Grad, to: int) -> str:
        return f"{grad.label} {self.index}->{to}"


def gradients(config: Config) -> torch.Tensor:
    """(workers, buckets, chunks, values): multiples of 1/8, so sums are exact."""
    generator = torch.Generator().manual_seed(29)
    shape = (config.num_workers, config.num_buckets, config.chunks_per_bucket, CHUNK_VALUES)
    return torch.randint(-64, 65, shape, generator=generator).to(torch.float64) / 8


def build(sim, config: Config) -> Cluster:
    grads = gradients(config)
    lanes = []
    for i in range(config.num_workers):
        lanes += [f"worker {i}", f"link {i} out", f"link {i} in"]
    sim.trace.declare_lanes(lanes)
    messages: list = []
    return Cluster(
        config=config,
        workers=[Replica(sim, i, config, grads[i]) for i in range(config.num_workers)],
        links=[NetLink(sim, i, config, messages) for i in range(config.num_workers)],
    )


# -- checks -------------------------------------------------------------------


def _sums(run) -> Check:
    config: Config = run.cluster.config
    n = config.num_workers
    expected = gradients(config).sum(dim=0)  # (buckets, chunks, values)
    everyone = tuple(range(n))
    for worker in run.cluster.workers:
        for bucket in range(config.num_buckets):
            for chunk in range(config.chunks_per_bucket):
                piece = worker.kept.get((bucket, chunk))
                where = f"Worker {worker.index}, bucket {bucket}, chunk {chunk}"
                if piece is None:
                    return Check.fail("sums", f"{where}: no gradient was set (set_gradient).")
                if piece.sources != everyone:
                    return Check.fail(
                        "sums",
                        f"{where}: the gradient set sums workers {list(piece.sources)}; it "
                        f"must sum each of workers {list(everyone)} exactly once.",
                    )
                if not torch.equal(piece.values[0], expected[bucket, chunk]):
                    return Check.fail("sums", f"{where}: the values differ from the sum.")
    return Check.ok("sums", "Every worker holds the exact sum of every bucket.")


def _provenance(run) -> Check:
    for part in (*run.cluster.workers, *run.cluster.links):
        if part.violations:
            return Check.fail("provenance", part.violations[0])
    return Check.ok("provenance", "Every worker used only what was in its own memory.")


def _links(run) -> Check:
    first = None
    for link in run.cluster.links:
        for lane, side in ((link.out_lane, "outgoing"), (link.in_lane, "incoming")):
            pair = run.trace.first_overlap(run.trace.select(lane=lane, op="send"))
            if pair and (first is None or pair[1].start < first[0][1].start):
                first = (pair, link.index, side)
    if first is None:
        return Check.ok("links", "Every link carried one message at a time, each way.")
    (a, b), index, side = first
    return Check.fail(
        "links",
        f"Link {index}'s {side} side carried {a.batch} and {b.batch} at the same time "
        f"(t={b.start / 1e6:.3f} s): each side of a link carries one message at a time.",
    )


def _dependencies(run) -> Check:
    config: Config = run.cluster.config
    for worker in run.cluster.workers:
        spans = list(run.trace.select(lane=worker.lane, op="backward"))
        done = [s.batch for s in spans]
        expected = [f"b{b}" for b in range(config.num_buckets)]
        if sorted(done) != expected:
            return Check.fail(
                "dependencies",
                f"Worker {worker.index} ran the backward of buckets {done}; it must run "
                f"each of {expected} once.",
            )
        ordered = sorted(spans, key=lambda s: s.start)
        for before, after in itertools.pairwise(ordered):
            if int(after.batch[1:]) < int(before.batch[1:]) or after.start < (
                before.end if before.end is not None else before.start
            ):
                return Check.fail(
                    "dependencies",
                    f"Worker {worker.index} started the backward of {after.batch} before "
                    f"the backward of {before.batch} had finished: the backward pass runs "
                    "bucket by bucket, bucket 0 first (each one needs the gradient that "
                    "flows out of the one before).",
                )
    messages = run.cluster.links[0].messages if run.cluster.links else []
    for start, sender, _to, grad in messages:
        if start < grad.ready:
            return Check.fail(
                "dependencies",
                f"Link {sender} sent {grad.label} before the backward that produced it "
                "had finished.",
            )
    return Check.ok(
        "dependencies", "Every backward ran once, in bucket order; every message carried "
        "data already produced."
    )


def check(run, baseline) -> list[Check]:
    return [_sums(run), _provenance(run), _links(run), _dependencies(run)]


def bound(baseline) -> float:
    """The last bucket exists when every worker's backward chain ends (B x cost); then
    every worker must still receive something about each chunk of it: at least one
    message, a whole bucket's worth of data, on its incoming side. And a worker's
    incoming side receives at least a whole bucket per bucket, after the first backward."""
    c: Config = baseline.cluster.config
    message = c.latency + c.bucket_mb / c.bandwidth
    best = max(
        c.num_buckets * c.backward_cost + message,
        c.backward_cost + c.num_buckets * message,
    )
    return baseline.makespan / best


EXERCISE = Exercise(
    build=build,
    check=check,
    scenarios=[
        Scenario("main", Config(), timed=True, seeds=2),
        # the race hunt: every seed; a bucket's ring (4 x 31.7 ms) outlasts a backward
        Scenario("three_workers", Config(num_workers=3, num_buckets=2, backward_cost=0.12)),
    ],
    target_speedup=4.5,
    bound=bound,
    bound_note=(
        "the backward chain of every bucket, then one message of a whole bucket into each "
        "worker for the last one (or: the first backward, then a whole bucket into each "
        "worker per bucket)"
    ),
    work_ops=("backward",),
)
