"""The candidate's file runs in a real module, as under `python file.py`: dataclasses with
string annotations, typing's forward references and pickle of the file's own classes
work (the file used to run in a bare namespace missing from sys.modules, so the
dataclass decorator raised AttributeError)."""

from pathlib import Path

from runner import tracks

SLUG = "async-parameter-server"
SOLUTION = Path(__file__).resolve().parents[2] / "exercises" / SLUG / "solution.py"

HEADER = '''from __future__ import annotations

import pickle
import typing
from dataclasses import dataclass, field


@dataclass
class Note:
    text: str
    seen: list[Note] = field(default_factory=list)


NOTE = pickle.loads(pickle.dumps(Note("kept", [Note("inner")])))
assert NOTE.seen[0].text == "inner"
assert typing.get_type_hints(Note)["text"] is str
assert __name__ == "__candidate__" and type(NOTE).__module__ == __name__
'''


def test_module_level_dataclasses_pickle_and_type_hints_work(write_code):
    solution = SOLUTION.read_text()
    result = tracks.grade(SLUG, write_code(HEADER + solution.split('"""', 2)[2]))
    assert result["verdict"] == "accepted", result["message"]
