"""The end of a run is sealed by the runtime with the run's own key, and the grader
checks the seal on the frame's bytes: a frame the program writes itself never passes
for the end (exercises/async-gradient-accumulation/examples/cheat_writes_its_own_end.py
shows it through a whole grading)."""

import secrets

from runner.candidate.program import _sealed
from runner.protocol import unsealed

END = {"k": "end", "t": 5, "ops": [], "value": {"$h": 3}, "leftover": ["`Event.wait`"]}


def test_the_runtimes_seal_passes_and_any_change_to_the_frame_does_not():
    key = secrets.token_bytes(32)
    frame = _sealed(END, key)
    assert unsealed(frame, key) is None
    assert b'"leftover":["`Event.wait`"]' in frame
    emptied = frame.replace(b'["`Event.wait`"]', b"[]")
    assert "wrong seal" in unsealed(emptied, key)
    assert "wrong seal" in unsealed(frame, secrets.token_bytes(32))  # another run's key
    assert "without its seal" in unsealed(_sealed(END, None), key)
    assert "without its seal" in unsealed(frame[:-3] + b'"}', key)
