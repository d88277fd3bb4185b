"""The simulation kit: costs, traces, and the races its yield points expose."""

import asyncio

import pytest
import torch

from runner.sim import Batch, GradientBuffer, Link, Model, ParameterServer, Stage, Worker
from runner.sim.clock import VirtualLoop
from runner.sim.core import Sim


def simulate(body):
    loop = VirtualLoop()
    sim = Sim(loop)
    try:
        with sim:
            result = loop.run_until_complete(body(sim))
    finally:
        loop.dispose()
    return sim, result


def batch(i=0):
    generator = torch.Generator().manual_seed(i)
    inputs = torch.randn(4, 8, generator=generator, dtype=torch.float64)
    return Batch(f"b{i}", inputs, inputs.sum(1))


def test_async_operations_overlap_and_blocking_ones_do_not():
    async def body(sim):
        model = Model(
            sim, torch.zeros(8, dtype=torch.float64), lr=0.1, step_cost=0, snapshot_cost=0
        )
        workers = [Worker(sim, i, 0.5) for i in range(3)]
        await asyncio.gather(
            *(w.compute_gradient_async(model, batch(i)) for i, w in enumerate(workers))
        )
        overlapped = sim.now()
        for i, w in enumerate(workers):
            w.compute_gradient(model, batch(i))
        return overlapped, sim.now() - overlapped

    sim, (overlapped, blocking) = simulate(body)
    assert (overlapped, blocking) == (0.5, 1.5)
    spans = [(s.lane, s.op, s.start, s.end, s.blocking) for s in sim.trace.spans]
    assert spans[0] == ("worker 0", "compute", 0, 500_000, False)
    assert spans[-1] == ("worker 2", "compute", 1_500_000, 2_000_000, True)


def test_gradients_are_real_numbers():
    async def body(sim):
        weights = torch.zeros(8, dtype=torch.float64)
        model = Model(sim, weights, lr=0.1, step_cost=0, snapshot_cost=0)
        return await Worker(sim, 0, 0.1).compute_gradient_async(model, batch())

    _, gradient = simulate(body)
    b = batch()
    expected = b.inputs.T @ (b.inputs @ torch.zeros(8, dtype=torch.float64) - b.targets) / 2
    assert torch.equal(gradient.values, expected)
    assert gradient.version == 0


def test_unlocked_concurrent_adds_lose_a_gradient_and_locked_ones_do_not():
    async def body(sim, locked):
        model = Model(
            sim, torch.zeros(8, dtype=torch.float64), lr=0.1, step_cost=0, snapshot_cost=0
        )
        worker = Worker(sim, 0, 0.1)
        buffer = GradientBuffer(sim, 8, add_cost=0.01)
        gradients = [worker._gradient(model, batch(i)) for i in range(4)]
        lock = asyncio.Lock()

        async def add(g):
            if locked:
                async with lock:
                    await buffer.add_async(g)
            else:
                await buffer.add_async(g)

        await asyncio.gather(*(add(g) for g in gradients))
        return buffer.count

    assert simulate(lambda sim: body(sim, locked=False))[1] == 1
    assert simulate(lambda sim: body(sim, locked=True))[1] == 4


def test_a_pull_during_a_push_is_torn():
    async def body(sim):
        server = ParameterServer(
            sim,
            torch.zeros(8, dtype=torch.float64),
            shards=4,
            lr=1.0,
            pull_cost=0.04,
            push_cost=0.04,
        )
        worker = Worker(sim, 0, 0.1)
        gradient = worker._gradient(server.pull(), batch())
        _, params = await asyncio.gather(server.push_async(gradient), server.pull_async())
        calm = await server.pull_async()
        return params, calm

    _, (params, calm) = simulate(body)
    assert params.version is None  # torn
    assert calm.version == 1


def test_a_stage_refuses_a_backward_without_its_forward():
    async def body(sim):
        stage = Stage(sim, 2, torch.eye(4, dtype=torch.float64), 0.1, 0.2)
        with pytest.raises(KeyError, match="stage 2 holds no activation for micro-batch 5"):
            await stage.backward_async(5, torch.ones(2, 4, dtype=torch.float64))

    simulate(body)


def test_forgetting_await_gets_a_hint():
    async def body(sim):
        link = Link(sim, 0, 1, 0.01)
        pending = link.send_async(torch.ones(2))
        with pytest.raises(TypeError, match="did you forget `await`"):
            link.send(pending)
        await pending

    simulate(body)
