"""Grader: asynchronous parameter server with heterogeneous workers.

Checks (each on every run, plain and shuffled):
- every_batch_once        every batch's gradient was computed and pushed exactly once
- no_lost_updates         server.version equals the number of pushes, and the weights
                          equal the initial weights minus lr x the sum of all pushes
- no_torn_reads           no pull mixed shards from before and after a push
- lock_not_held_across_compute   (async computations only) workers compute at the same time
- workers_independent     (async computations only) a fast worker never sits idle waiting
                          for a slower one: no barrier
- one_batch_per_worker    a worker computes one batch at a time
- fresh_weights           every gradient was computed on parameters pulled for it: from a
                          pull (not the server's live weights), one pull per gradient, and
                          started after the worker's previous push was applied
(+ clean_shutdown, plausible, blocking_calls, threads, polling from the framework)
"""

from __future__ import annotations

import heapq
import itertools
from dataclasses import dataclass

import torch

from runner.sdk import Check, Exercise, Scenario, one_at_a_time
from runner.sim import Batch, BatchQueue, Cluster, ParameterServer, Worker
from runner.sim.training import regression_data


@dataclass(frozen=True)
class Config:
    num_workers: int = 4
    compute_costs: tuple[float, ...] = (0.10, 0.10, 0.20, 0.40)
    total_batches: int = 48
    batch_size: int = 4
    dim: int = 16
    shards: int = 4
    lr: float = 0.01
    # simulated costs, in seconds
    pull_cost: float = 0.01
    push_cost: float = 0.01


def build(sim, config: Config) -> Cluster:
    generator = torch.Generator().manual_seed(5)
    true_weights = torch.randn(config.dim, generator=generator, dtype=torch.float64)
    inputs, targets = regression_data(
        17, config.total_batches * config.batch_size, config.dim, true_weights, noise=0.1
    )
    size = config.batch_size
    batches = [
        Batch(
            f"b{i:02d}", inputs[i * size : (i + 1) * size], targets[i * size : (i + 1) * size], 0, i
        )
        for i in range(config.total_batches)
    ]
    workers = [Worker(sim, i, config.compute_costs[i]) for i in range(config.num_workers)]
    sim.trace.declare_lanes([w.lane for w in workers] + ["server"])
    return Cluster(
        config=config,
        server=ParameterServer(
            sim,
            torch.zeros(config.dim, dtype=torch.float64),
            shards=config.shards,
            lr=config.lr,
            pull_cost=config.pull_cost,
            push_cost=config.push_cost,
        ),
        workers=workers,
        data=BatchQueue(batches),
    )


# -- checks -------------------------------------------------------------------


def check(run, baseline) -> list[Check]:
    config: Config = run.cluster.config
    server: ParameterServer = run.cluster.server
    checks = []

    # every_batch_once
    pushed: dict[str, int] = {}
    for push in server.pushes:
        pushed[push.batch] = pushed.get(push.batch, 0) + 1
    problem = None
    for i in range(config.total_batches):
        batch = f"b{i:02d}"
        if pushed.get(batch, 0) != 1:
            problem = (
                f"The gradient of batch {batch} was pushed {pushed.get(batch, 0)} times "
                "(every batch exactly once)."
            )
            break
    checks.append(
        Check.verdict(
            "every_batch_once",
            problem is None,
            f"All {config.total_batches} gradients were pushed once.",
            problem or "",
        )
    )

    # no_lost_updates
    expected = server.initial.clone()
    for push in server.pushes:
        expected = expected - server.lr * push.values
    got = server.values
    problem = None
    if server.version != len(server.pushes):
        problem = (
            f"{len(server.pushes)} pushes were made but the server's version is "
            f"{server.version}: concurrent pushes overwrote each other."
        )
    elif not torch.allclose(got, expected, rtol=1e-9, atol=1e-12):
        diff = float((got - expected).abs().max())
        problem = (
            "The server's weights are not the initial weights minus every pushed update "
            f"(largest difference {diff:.3g}): an update was lost."
        )
    checks.append(
        Check.verdict(
            "no_lost_updates",
            problem is None,
            f"All {len(server.pushes)} updates are in the weights (version {server.version}).",
            problem or "",
        )
    )

    # no_torn_reads
    torn_gradients = sum(1 for push in server.pushes if push.grad_version is None)
    checks.append(
        Check.verdict(
            "no_torn_reads",
            server.torn_pulls == 0 and torn_gradients == 0,
            f"All {server.pulls} pulls read consistent weights.",
            f"{server.torn_pulls} of {server.pulls} pulls read some shards before a push and some "
            "after it (a torn read): a pull must not run while a push is being applied.",
        )
    )

    # The next two describe concurrent programs: they apply once computations are async.
    computes = [s for s in run.trace.select(op="compute")]
    concurrent = any(not s.blocking for s in computes) and config.num_workers > 1
    if not concurrent:
        skip = "Computations are blocking calls, so they cannot overlap yet."
        checks.append(Check.skip("lock_not_held_across_compute", skip))
        checks.append(Check.skip("workers_independent", skip))
        checks.extend(_worker_checks(run))
        return checks

    overlapping = any(
        a.lane != b.lane and a.overlaps(b) for i, a in enumerate(computes) for b in computes[:i]
    )
    checks.append(
        Check.verdict(
            "lock_not_held_across_compute",
            overlapping,
            "Workers computed at the same time.",
            "No two workers ever computed at the same time: the workers must run concurrently, "
            "and the server lock must not be held across the computation.",
        )
    )

    # A worker may wait for the server lock (every other worker's pull and push, twice
    # over), but not for a whole computation of a slower worker.
    allowed = round(2 * config.num_workers * (config.pull_cost + config.push_cost) * 1e6)
    problem = None
    for worker in run.cluster.workers:
        spans = sorted(run.trace.select(lane=worker.lane, op="compute"), key=lambda s: s.start)
        for before, after in itertools.pairwise(spans):
            # time the whole loop spent blocked is not waiting for anyone
            idle = after.start - before.end - run.trace.blocked_ticks(before.end, after.start)
            if idle > allowed:
                problem = (
                    f"{worker.lane} sat idle for {idle / 1e6:.3f} s between two batches "
                    f"(waiting for the server explains at most {allowed / 1e6:.2f} s): fast "
                    "workers must not wait for slow ones."
                )
                break
        if problem:
            break
    checks.append(
        Check.verdict(
            "workers_independent",
            problem is None,
            "No worker waited for a slower one.",
            problem or "",
        )
    )
    checks.extend(_worker_checks(run))
    return checks


def _worker_checks(run) -> list[Check]:
    server: ParameterServer = run.cluster.server
    checks = [
        one_at_a_time(
            run,
            (w.lane for w in run.cluster.workers),
            "compute",
            "one_batch_per_worker",
            what="a worker computes one batch at a time.",
        )
    ]
    # fresh_weights: where the weights of every pushed gradient came from (recorded by
    # the kit in the grader's process, whatever the trainer did with its handles).
    push_end = {s.batch: s.end for s in run.trace.select(op="push") if s.end is not None}
    used: dict[int, str] = {}
    last_push: dict[int, int] = {}
    problem = None
    for push in sorted(server.pushes, key=lambda p: push_end.get(p.batch, 0)):
        origin = push.weights_from
        if not origin or origin[0] != "pull":
            problem = (
                f"The gradient of {push.batch} was computed on weights that were never pulled "
                "(the server's live weights, or the trainer's own): a worker computes on the "
                "parameters it pulled."
            )
            break
        _, pull, pull_start, _pull_end = origin
        if pull in used:
            problem = (
                f"The gradients of {used[pull]} and {push.batch} were computed on the same pull: "
                "a worker pulls fresh parameters before every batch."
            )
            break
        used[pull] = push.batch
        previous = last_push.get(push.worker)
        if previous is not None and pull_start < previous:
            problem = (
                f"worker {push.worker} computed {push.batch} on parameters pulled before its "
                "previous push was applied: pull after pushing, so every batch starts from the "
                "updated parameters."
            )
            break
        last_push[push.worker] = push_end.get(push.batch, 0)
    checks.append(
        Check.verdict(
            "fresh_weights",
            problem is None,
            "Every gradient was computed on parameters pulled for it, after the worker's "
            "previous push.",
            problem or "",
        )
    )
    return checks


def bound(baseline) -> float:
    """Best possible time: every worker computing back to back (plus one pull and one
    push), or every push applied back to back, whichever is longer."""
    c: Config = baseline.cluster.config
    # When the last of the batches is done if every worker computes back to back: the
    # total_batches-th earliest of the finishing times k * cost (k = 1, 2, ...) of all
    # workers together.
    finishes = [(cost, cost) for cost in c.compute_costs]
    heapq.heapify(finishes)
    t = 0.0
    for _ in range(c.total_batches):
        t, cost = heapq.heappop(finishes)
        heapq.heappush(finishes, (t + cost, cost))
    best = max(
        t + c.pull_cost + c.push_cost,
        c.total_batches * c.push_cost + c.pull_cost + min(c.compute_costs),
    )
    return baseline.makespan / best


EXERCISE = Exercise(
    build=build,
    check=check,
    scenarios=[
        Scenario("main", Config(), timed=True, seeds=4),
        Scenario("few_batches", Config(total_batches=6)),
    ],
    target_speedup=4.0,
    work=lambda run: sum(1 for _ in run.trace.select(op="compute")),  # batches computed
    bound=bound,
    bound_note=(
        "all workers computing back to back (throughput sum 1/c_w) or all pushes back to "
        "back; a parallel round with a barrier would get baseline / (rounds x slowest worker)"
    ),
)
