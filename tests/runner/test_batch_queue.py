"""The batch queue is taken from on the candidate's side, and replayed by the grader.

``BatchQueue.next_batch()`` costs no round trip: the grader sends the sequence with the
queue's handle and replays each take, in order, at the time it was made. The grader's
queue stays the truth: what it says (``remaining``), what the checks count.
"""

from runner.sim import grading
from tests.runner.helpers import solution_source

PS = "async-parameter-server"


def ps_solution_with(old: str, new: str) -> str:
    source = solution_source(PS)
    assert old in source
    return source.replace(old, new)


def test_the_grader_sees_every_take_in_order(write_code):
    source = ps_solution_with(
        "    async def train(self):\n",
        "    async def train(self):\n"
        "        total = self.data.total\n"
        "        first = self.data.next_batch()\n"
        "        print('after one take', self.data.remaining, 'of', total, first.id)\n"
        "        await self._train()\n"
        "        print('at the end', self.data.remaining, self.data.next_batch())\n"
        "        return first\n"
        "\n"
        "    async def _train(self):\n",
    )
    result = grading.grade(PS, write_code(source), seeds=0)
    total = result["stdout"].split()[5]
    assert f"after one take {int(total) - 1} of {total}" in result["stdout"]
    assert "at the end 0 None" in result["stdout"]
    # The first batch went to nobody's gradient: the grader counted one batch fewer.
    assert result["verdict"] == "wrong"


def test_a_take_from_an_object_that_is_no_queue_breaks_the_protocol(write_code):
    source = ps_solution_with(
        "    async def train(self):\n",
        "    async def train(self):\n"
        "        worker = self.workers[0]\n"
        "        runtime = type(worker)._overlap_runtime\n"
        "        runtime.out.append(['q', object.__getattribute__(worker, '_h'), 1])\n"
        "        await self._train()\n"
        "\n"
        "    async def _train(self):\n",
    )
    result = grading.grade(PS, write_code(source), seeds=0)
    assert result["verdict"] == "runtime_error"
    assert "protocol" in result["message"] and "not a queue" in result["message"]


def test_resetting_the_local_queue_only_repeats_batches_and_fails(write_code):
    source = ps_solution_with(
        "        while (batch := self.data.next_batch()) is not None:\n",
        "        object.__setattr__(self.data, '_overlap_taken', 0)\n"
        "        while (batch := self.data.next_batch()) is not None:\n",
    )
    result = grading.grade(PS, write_code(source), seeds=0)
    assert result["verdict"] == "wrong"


def test_taking_every_batch_at_once_is_one_operation(write_code):
    """An honest trainer that takes the whole queue in one go (more takes than one frame
    may carry operations) is graded like any other; a claimed count far past the end
    costs the grader nothing."""
    source = ps_solution_with(
        "    async def train(self):\n",
        "    async def train(self):\n"
        "        runtime = type(self.data)._overlap_runtime\n"
        "        for _ in range(5000):\n"
        "            self.data.next_batch()  # past the end: None, 5000 times\n"
        "        print('ops', len(runtime.out), runtime.out[-1][2])\n"
        "        runtime.out[-1][2] = 10**15\n"
        "        print('left', self.data.remaining)\n"
        "        await self._train()\n"
        "\n"
        "    async def _train(self):\n",
    )
    result = grading.grade(PS, write_code(source), seeds=0)
    assert "ops 1 5000" in result["stdout"] and "left 0" in result["stdout"], result
    assert result["verdict"] == "wrong"  # no batch was left to train on
