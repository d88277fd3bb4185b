"""Model-parallel parts: layer stages on separate nodes, links between them, micro-batches.

Stage ``k`` holds one ``tanh`` layer. ``forward(mb, x)`` stores the activation it
needs for the backward pass; ``backward(mb, grad)`` uses and frees it, adds the
weight gradient into the stage's accumulated gradient and returns the gradient
for the previous stage. Tensors travel between stages over :class:`Link` objects.
As everywhere in the kit, ``op`` blocks and ``await op_async`` does not.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from runner.sim.core import Sim, Surface
from runner.sim.training import expect


@dataclass(frozen=True, eq=False)
class MicroBatch:
    """One micro-batch: ``inputs`` go into stage 0, ``targets`` are compared with the output."""

    id: int
    inputs: torch.Tensor
    targets: torch.Tensor
    sim: Sim | None = field(default=None, repr=False)  # records where gradients came from

    def __post_init__(self) -> None:
        if self.sim is not None:
            self.sim.mark(self.inputs, "input", self.id)

    KIT_SURFACE = Surface(const=("id", "inputs", "targets"), free=("loss_gradient",))

    def loss_gradient(self, outputs: torch.Tensor) -> torch.Tensor:
        """Gradient of the squared-error loss with respect to the last stage's output (free)."""
        expect(outputs, torch.Tensor, "MicroBatch.loss_gradient(outputs)")
        gradient = (outputs - self.targets) * (2.0 / len(self.targets))
        if self.sim is not None:
            self.sim.mark(gradient, "loss", self.id, self.sim.origin(outputs))
        return gradient

    def __repr__(self) -> str:
        return f"MicroBatch({self.id})"


class Stage:
    """One layer of the model on its own node. A node runs one operation at a time.

    ``consumed`` records, for every forward and backward, where its input tensor came
    from (``Sim.mark``): the checks follow each activation and gradient across the links.
    """

    KIT_SURFACE = Surface(
        const=("index", "lane", "forward_cost", "backward_cost"),
        live=("stored_activations", "gradient"),
        block=("forward", "backward"),
        async_=("forward_async", "backward_async"),
    )

    def __init__(
        self, sim: Sim, index: int, weight: torch.Tensor, forward_cost: float, backward_cost: float
    ) -> None:
        self._sim = sim
        self.index = index
        self.lane = f"stage {index}"
        self.forward_cost = forward_cost
        self.backward_cost = backward_cost
        self._weight = weight.clone()
        self._grad = torch.zeros_like(weight)
        self._stash: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
        self.peak_stored = 0
        self.consumed: list[tuple[str, int, tuple | None, int]] = []  # (op, mb, origin, tick)

    def __repr__(self) -> str:
        return f"Stage({self.index}, stored={len(self._stash)})"

    @property
    def stored_activations(self) -> int:
        """How many micro-batches' activations this node holds now (memory in use)."""
        return len(self._stash)

    @property
    def gradient(self) -> torch.Tensor:
        """A copy of the weight gradient accumulated so far."""
        return self._grad.clone()

    def _forward(self, mb: int, x: torch.Tensor) -> torch.Tensor:
        expect(x, torch.Tensor, f"Stage {self.index} forward input")
        self.consumed.append(("forward", mb, self._sim.origin(x), self._sim.ticks()))
        y = torch.tanh(x @ self._weight.T)
        self._stash[mb] = (x, y)
        self.peak_stored = max(self.peak_stored, len(self._stash))
        self._sim.mark(y, "forward", self.index, mb)
        return y

    def _backward(self, mb: int, grad: torch.Tensor):
        expect(grad, torch.Tensor, f"Stage {self.index} backward gradient")
        self.consumed.append(("backward", mb, self._sim.origin(grad), self._sim.ticks()))
        if mb not in self._stash:
            raise KeyError(
                f"stage {self.index} holds no activation for micro-batch {mb}: "
                "run its forward on this stage first (and backward only once)"
            )
        x, y = self._stash[mb]
        grad_z = grad * (1 - y * y)
        grad_input = grad_z @ self._weight
        self._sim.mark(grad_input, "backward", self.index, mb)
        return grad_z.T @ x, grad_input

    def forward(self, mb: int, x: torch.Tensor) -> torch.Tensor:
        y = self._forward(mb, x)
        self._sim.block(self.lane, "forward", self.forward_cost, f"mb{mb}", call="Stage.forward")
        return y

    async def forward_async(self, mb: int, x: torch.Tensor) -> torch.Tensor:
        y = self._forward(mb, x)
        await self._sim.busy(self.lane, "forward", self.forward_cost, f"mb{mb}")
        return y

    def backward(self, mb: int, grad: torch.Tensor) -> torch.Tensor:
        grad_weight, grad_input = self._backward(mb, grad)
        self._sim.block(self.lane, "backward", self.backward_cost, f"mb{mb}", call="Stage.backward")
        self._grad = self._grad + grad_weight
        del self._stash[mb]
        return grad_input

    async def backward_async(self, mb: int, grad: torch.Tensor) -> torch.Tensor:
        grad_weight, grad_input = self._backward(mb, grad)
        accumulated = self._grad  # read ...
        await self._sim.busy(self.lane, "backward", self.backward_cost, f"mb{mb}")
        self._grad = accumulated + grad_weight  # ... modify, write
        self._stash.pop(mb, None)
        return grad_input


class Link:
    """A network link between two neighbouring stages; carries tensors both ways.

    What arrives is a copy, marked as delivered by this link (for the causality check)."""

    KIT_SURFACE = Surface(const=("ends", "cost", "lane"), block=("send",), async_=("send_async",))

    def __init__(self, sim: Sim, a: int, b: int, cost: float) -> None:
        self._sim = sim
        self.ends = (a, b)
        self.cost = cost
        self.lane = f"link {a}-{b}"

    def __repr__(self) -> str:
        return f"Link({self.ends[0]}, {self.ends[1]}, cost={self.cost})"

    def send(self, tensor: torch.Tensor, mb: int | None = None) -> torch.Tensor:
        """Carry ``tensor`` to the other end (blocking); returns the delivered copy."""
        expect(tensor, torch.Tensor, "Link.send(tensor)")
        batch = None if mb is None else f"mb{mb}"
        self._sim.block(self.lane, "send", self.cost, batch, call="Link.send")
        return self._delivered(tensor, mb)

    async def send_async(self, tensor: torch.Tensor, mb: int | None = None) -> torch.Tensor:
        expect(tensor, torch.Tensor, "Link.send_async(tensor)")
        batch = None if mb is None else f"mb{mb}"
        await self._sim.busy(self.lane, "send", self.cost, batch)
        return self._delivered(tensor, mb)

    def _delivered(self, tensor: torch.Tensor, mb: int | None) -> torch.Tensor:
        copy = tensor.clone()
        self._sim.mark(copy, "send", self.ends, mb, self._sim.origin(tensor), self._sim.ticks())
        return copy
