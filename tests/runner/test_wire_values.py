"""Values a program hands the simulation or returns that the wire cannot carry: each is
the program's own error or wrong answer, said plainly, never "the program ended its own
process" (what a failed send in the candidate's process used to look like)."""

import pytest

from tests.runner.helpers import failing, graded

SLUG = "input-pipeline-prefetch"

PROGRAM = '''
import asyncio


class Trainer:
    def __init__(self, cluster):
        self.cluster = cluster

    async def train(self):
        loader = self.cluster.loaders[0]
        {body}
'''


@pytest.fixture
def grade(tmp_path):
    def _grade(body: str) -> dict:
        path = tmp_path / "solution.py"
        path.write_text(PROGRAM.format(body=body))
        return graded(SLUG, str(path))

    return _grade


@pytest.mark.parametrize(("argument", "error"), [
    ("float('nan')", "ValueError: the simulation takes finite numbers, not nan"),
    ("float('-inf')", "ValueError: the simulation takes finite numbers, not -inf"),
    ("2 ** 70", "OverflowError: an integer this large cannot be passed"),
    ("[0] * 5000", "ValueError: a list over 4,096 items cannot be passed"),
    ("'x' * 20000", "ValueError: a string over 16,384 characters cannot be passed"),
    ("[[[[[[[[[[0]]]]]]]]]]", "ValueError: a value nested more than 8 deep"),
])
def test_an_argument_the_simulation_cannot_take_raises_where_it_was_passed(
        grade, argument, error):
    result = grade(f"await loader.load_async({argument})")
    assert result["verdict"] == "runtime_error", result["message"]
    assert result["message"].startswith(error.split(":")[0] + " (line 11): "), result["message"]
    assert error.split(": ", 1)[1] in result["message"]


def test_the_program_can_catch_it_and_go_on(grade):
    result = grade(
        "try:\n"
        "            await loader.load_async(float('nan'))\n"
        "        except ValueError as error:\n"
        "            print('refused:', error)\n"
        "        return 0"
    )
    assert "refused: the simulation takes finite numbers, not nan" in result["stdout"]
    assert result["verdict"] == "wrong", result["message"]  # it trained nothing: no error


@pytest.mark.parametrize("value", ["float('nan')", "10 ** 5000", "2 ** 63", "[1] * 5000"])
def test_a_returned_value_the_wire_cannot_carry_is_a_wrong_result(grade, value):
    result = grade(f"return {value}")
    assert result["verdict"] == "wrong", result["message"]
    assert "result" in failing(result), result["message"]
    assert "ended its own process" not in result["message"]


def test_an_exception_whose_str_fails_is_still_named_with_its_line(grade, tmp_path):
    path = tmp_path / "weird.py"
    path.write_text(
        "class Weird(Exception):\n"
        "    def __str__(self):\n"
        "        raise ValueError('no text')\n"
        "\n\n"
        "class Trainer:\n"
        "    def __init__(self, cluster):\n"
        "        pass\n"
        "\n"
        "    def train(self):\n"
        "        raise Weird()\n"
    )
    result = graded(SLUG, str(path))
    assert result["verdict"] == "runtime_error"
    assert result["message"] == "Weird (line 11): <the exception's str() failed>"
