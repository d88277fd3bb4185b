"""Data-parallel gradient sync through one worker (synchronous starter).

The grader calls ``Trainer(cluster).train()`` (``train`` may become ``async def``)
and checks what every worker ends up holding, and what ran when.

``cluster`` holds:

- ``cluster.config``: ``num_workers`` (N), ``num_buckets``, ``bucket_mb`` (the size of
  one bucket's gradient), ``chunks_per_bucket`` (= N) and ``chunk_mb``, and the simulated
  costs: ``backward_cost`` (seconds, one bucket on one worker), ``latency`` (seconds, every
  message) and ``bandwidth`` (MB/s, each way, on every link);
- ``cluster.workers``: the N workers. ``worker.backward(bucket)`` runs the backward pass
  of one bucket's layers and returns this worker's gradient of it, a ``Grad``. Buckets
  come in order on each worker, bucket 0 first (it holds the last layers: the backward
  of bucket b needs what flows out of bucket b - 1), one at a time.
  ``worker.add(a, b)`` sums two pieces of the same bucket and chunks, both in this
  worker's memory (free). ``worker.set_gradient(grad)`` writes an all-reduced gradient
  into the worker's parameters: a whole bucket, or a list of its chunks (free);
- ``cluster.links``: ``links[i]`` is worker i's full-duplex link to the switch.
  ``links[i].send(grad, to=j)`` carries a piece held by worker i to worker j and returns
  the copy that arrived (held by j). A message costs ``latency + grad.size_mb /
  bandwidth`` (``link.cost(grad)``, free) and occupies link i's outgoing side and link
  j's incoming side: each side carries one message at a time.

A ``Grad`` is a piece of one bucket's gradient in one worker's memory: ``bucket``,
``chunks`` (the chunk indices it covers; a whole bucket covers ``0 .. N - 1``),
``holder`` (whose memory), ``sources`` (whose gradients it sums) and ``size_mb``;
``grad.split()`` (free) returns one ``Grad`` per chunk, on the same worker. A worker only
reads what is in its own memory: anything else must cross a link first.

Every costed operation has an ``_async`` twin to ``await`` (``backward_async``,
``send_async``): same cost, but other tasks run meanwhile. The plain forms block
everything.

When ``train()`` returns, every worker must have set, for every bucket, the sum of all
N workers' gradients of that bucket.
"""


class Trainer:
    def __init__(self, cluster):
        self.config = cluster.config
        self.workers = cluster.workers
        self.links = cluster.links

    def allreduce(self, grads):
        # Everyone sends its gradient to worker 0, which sums and sends the sum back.
        root = self.workers[0]
        total = grads[0]
        for i in range(1, len(self.workers)):
            arrived = self.links[i].send(grads[i], to=0)
            total = root.add(total, arrived)
        root.set_gradient(total)
        for i in range(1, len(self.workers)):
            copy = self.links[0].send(total, to=i)
            self.workers[i].set_gradient(copy)

    def train(self):
        for bucket in range(self.config.num_buckets):
            grads = [worker.backward(bucket) for worker in self.workers]
            self.allreduce(grads)
