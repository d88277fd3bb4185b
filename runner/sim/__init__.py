"""The simulation kit: simulated nodes, workers, links and the model.

Your trainer receives a :class:`Cluster` built by the exercise; you do not create
these objects yourself. Everything runs on a virtual clock: computation and
communication cost simulated seconds, nothing really sleeps, and the same program
always takes the same simulated time.

Each operation comes in two forms:

- ``worker.compute_gradient(weights, batch)`` *blocks*: it costs its full time and
  nothing else can run meanwhile (like a synchronous call on a real event loop);
- ``await worker.compute_gradient_async(weights, batch)`` costs the same time but
  lets other tasks run meanwhile.

Use ``asyncio`` (tasks, ``gather``, ``Lock``, ``Semaphore``, ``Event``, ``Queue``)
to overlap the async forms. ``time.sleep`` and busy-waiting on the clock block and
cost simulated time; threads and executors run inline (there is one thread).

Parts, by exercise:

- data-parallel training (:mod:`runner.sim.training`): :class:`Worker`,
  :class:`Model` (weights + SGD, ``step``/``snapshot``), :class:`GradientBuffer`,
  :class:`Validator`, :class:`Batch`, :class:`Gradient`, :class:`Snapshot`,
  :class:`EpochData`, :class:`BatchQueue`;
- model-parallel pipelines (:mod:`runner.sim.pipeline`): :class:`Stage`,
  :class:`Link`, :class:`MicroBatch`;
- parameter servers (:mod:`runner.sim.parameter_server`): :class:`ParameterServer`,
  :class:`Params`.
"""

from runner.sim.core import Cluster
from runner.sim.parameter_server import ParameterServer, Params
from runner.sim.pipeline import Link, MicroBatch, Stage
from runner.sim.training import (
    Batch,
    BatchQueue,
    EpochData,
    Gradient,
    GradientBuffer,
    Model,
    Snapshot,
    Validator,
    Worker,
)

__all__ = [
    "Batch",
    "BatchQueue",
    "Cluster",
    "EpochData",
    "Gradient",
    "GradientBuffer",
    "Link",
    "MicroBatch",
    "Model",
    "ParameterServer",
    "Params",
    "Snapshot",
    "Stage",
    "Validator",
    "Worker",
]
