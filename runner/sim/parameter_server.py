"""A parameter server: the global weights, sharded, with pull and push over the network.

``pull()`` copies the weights shard by shard; ``push(gradient)`` applies
``weights -= lr * gradient`` shard by shard, each shard a read-modify-write.
The transfers take time, so without a lock a pull can mix shards from before and
after a push (a *torn* read) and two pushes can overwrite each other (a *lost*
update). ``version`` counts the pushes applied.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from runner.sim.core import Sim, Surface
from runner.sim.training import Gradient, expect


@dataclass(frozen=True, eq=False)
class Params:
    """Weights pulled from the server. ``version`` is None when the read was torn."""

    values: torch.Tensor
    version: int | None

    KIT_SURFACE = Surface(const=("version", "values"))

    def __repr__(self) -> str:
        return f"Params(version={self.version})"


@dataclass
class PushRecord:
    batch: str
    worker: int
    grad_version: int | None
    values: torch.Tensor
    weights_from: tuple | None = None  # origin of the weights the gradient was computed on


class ParameterServer:
    lane = "server"
    KIT_SURFACE = Surface(
        const=("lr", "pull_cost", "push_cost", "lane"),
        live=("version", "values"),
        block=("pull", "push"),
        async_=("pull_async", "push_async"),
    )

    def __init__(
        self,
        sim: Sim,
        weights: torch.Tensor,
        *,
        shards: int,
        lr: float,
        pull_cost: float,
        push_cost: float,
    ) -> None:
        self._sim = sim
        self.lr = lr
        self.pull_cost = pull_cost
        self.push_cost = push_cost
        self._shards = list(torch.chunk(weights.clone(), shards))
        self.version = 0
        self._half_applied = 0  # pushes that have written some of their shards, not yet all
        self._writes = 0  # shard writes ever made
        self.initial = weights.clone()
        self.pushes: list[PushRecord] = []
        self.torn_pulls = 0
        self.pulls = 0

    def __repr__(self) -> str:
        return f"ParameterServer(version={self.version})"

    @property
    def values(self) -> torch.Tensor:
        """A copy of the current global weights."""
        return torch.cat(self._shards)

    # -- pull -----------------------------------------------------------------

    def pull(self) -> Params:
        start = self._sim.ticks()
        self._sim.block(self.lane, "pull", self.pull_cost, call="ParameterServer.pull")
        self.pulls += 1
        return self._pulled(Params(self.values, self.version), start)

    def _pulled(self, params: Params, start: int) -> Params:
        self._sim.mark(params, "pull", self.pulls, start, self._sim.ticks())
        return params

    async def pull_async(self) -> Params:
        per_shard = self.pull_cost / len(self._shards)
        copied: list[torch.Tensor] = []
        torn = False
        start = self._sim.ticks()
        async with self._sim.span(self.lane, "pull"):
            writes_before, version = self._writes, self.version
            for shard in range(len(self._shards)):
                await self._sim.wait(per_shard)
                torn = torn or self._half_applied > 0
                copied.append(self._shards[shard].clone())
            torn = torn or self._writes != writes_before
        self.pulls += 1
        if torn:
            self.torn_pulls += 1
        return self._pulled(Params(torch.cat(copied), None if torn else version), start)

    # -- push -----------------------------------------------------------------

    def _record(self, gradient: Gradient) -> None:
        expect(gradient, Gradient, "ParameterServer.push(gradient)")
        self.pushes.append(
            PushRecord(
                gradient.batch,
                gradient.worker,
                gradient.version,
                gradient.values,
                gradient.weights_from,
            )
        )

    def push(self, gradient: Gradient) -> None:
        self._record(gradient)
        self._sim.block(
            self.lane, "push", self.push_cost, gradient.batch, call="ParameterServer.push"
        )
        for shard, update in enumerate(torch.chunk(gradient.values, len(self._shards))):
            self._shards[shard] = self._shards[shard] - self.lr * update
            self._writes += 1
        self.version += 1

    async def push_async(self, gradient: Gradient) -> None:
        self._record(gradient)
        per_shard = self.push_cost / len(self._shards)
        updates = torch.chunk(gradient.values, len(self._shards))
        async with self._sim.span(self.lane, "push", gradient.batch):
            version = self.version  # read the counter ...
            written = 0
            try:
                for shard, update in enumerate(updates):
                    current = self._shards[shard]  # read the shard ...
                    await self._sim.wait(per_shard)
                    self._shards[shard] = current - self.lr * update  # ... write it back
                    self._writes += 1
                    written += 1
                    if written == 1:
                        self._half_applied += 1
            finally:
                if written:
                    self._half_applied -= 1
            self.version = version + 1  # ... write the counter back
