"""The virtual clock: exact simulated time, blocking advances, shuffles, stuck loops."""

import asyncio
import time

import pytest

from runner.sim.clock import Deadlock, Livelock, VirtualLoop, VirtualTimeLimit


def run(coro_fn, **loop_options):
    loop = VirtualLoop(**loop_options)
    try:
        return loop, loop.run_until_complete(coro_fn(loop))
    finally:
        loop.dispose()


def test_sleeping_an_hour_takes_no_real_time():
    async def main(loop):
        await asyncio.gather(asyncio.sleep(3600), asyncio.sleep(1800))
        return loop.time()

    start = time.monotonic()
    _, now = run(main)
    assert now == 3600.0
    assert time.monotonic() - start < 1


def test_costs_add_up_exactly():
    async def main(loop):
        for _ in range(10):
            future = loop.create_future()
            loop.wake_at(loop.ticks() + 100_000, future)  # 0.1 s
            await future
        return loop.time()

    assert run(main)[1] == 1.0  # not 0.9999999999999999


def test_a_blocking_advance_stalls_every_other_task():
    log = []

    async def ticker(loop):
        for _ in range(3):
            await asyncio.sleep(1)
            log.append(("tick", loop.time()))

    async def main(loop):
        task = asyncio.create_task(ticker(loop))
        await asyncio.sleep(0.5)
        loop.advance(2.0)  # blocks: the ticker's timer at t=1 cannot fire until it ends
        log.append(("blocked until", loop.time()))
        await task

    run(main)
    assert log == [("blocked until", 2.5), ("tick", 2.5), ("tick", 3.5), ("tick", 4.5)]


def _ready_order(seed):
    """Ready callbacks on the candidates' loop (standalone: no grader behind it)."""
    from runner.candidate.loop import standalone_loop

    order = []

    async def main():
        async def append(i):
            order.append(i)

        await asyncio.gather(*(append(i) for i in range(8)))

    loop = standalone_loop(seed)
    try:
        loop.run_until_complete(main())
    finally:
        loop.close()
    return order


def _timer_order(seed):
    """Timers due at the same instant, on the candidates' loop."""
    from runner.candidate.loop import standalone_loop

    order = []

    async def main():
        async def wake(i):
            await asyncio.sleep(0.5)
            order.append(i)

        await asyncio.gather(*(wake(i) for i in range(8)))

    loop = standalone_loop(seed)
    try:
        loop.run_until_complete(main())
        assert loop.time() == 0.5
    finally:
        loop.close()
    return order


def test_ready_callbacks_run_in_fifo_order_whatever_the_seed():
    # asyncio documents FIFO order for ready callbacks; a correct program may rely on it.
    for seed in (None, 1, 2, 3, 7):
        assert _ready_order(seed) == list(range(8))


def test_a_seed_orders_timers_due_at_the_same_instant_replayably():
    # asyncio gives no order to timers due at one instant: every order is a real one.
    assert _timer_order(7) == _timer_order(7)
    assert sorted(_timer_order(7)) == list(range(8))
    assert len({tuple(_timer_order(seed)) for seed in range(1, 6)}) > 1


def test_waiting_for_something_that_never_comes_is_a_deadlock():
    async def main(loop):
        await asyncio.Event().wait()

    with pytest.raises(Deadlock):
        run(main)


def test_passing_the_time_limit_stops_the_loop():
    async def main(loop):
        await asyncio.sleep(100)

    with pytest.raises(VirtualTimeLimit):
        run(main, time_limit=10)


def test_a_blocking_call_past_the_limit_stops_too():
    async def main(loop):
        loop.advance(11)

    with pytest.raises(VirtualTimeLimit):
        run(main, time_limit=10)


def test_spinning_without_time_moving_is_a_livelock():
    async def main(loop):
        while True:
            await asyncio.sleep(0)

    with pytest.raises(Livelock):
        run(main, max_idle_iterations=1000)


def test_stuck_errors_cannot_be_swallowed_by_except_exception():
    assert not issubclass(Deadlock, Exception)
