"""The capacity benchmark's answer: the largest N that met the bar before the first that did
not (the stack itself is played by `manage.py bench_capacity`, too long for a test)."""

from ops.bench_capacity import Step, search, table


def _step(n, seconds, verdicts=None, errors=()):
    step = Step(n, clicks=[(s, i) for i, s in enumerate(seconds)], errors=list(errors))
    step.verdicts = verdicts if verdicts is not None else {i: "accepted"
                                                           for i in range(len(seconds))}
    return step


def test_the_answer_is_the_last_step_before_the_first_that_misses_the_bar():
    outcomes = {1: [0.8, 0.9, 1.0], 2: [1.0, 1.2, 1.9], 4: [1.5, 2.6, 3.1], 6: [0.5]}
    played = []

    def play(n):
        played.append(n)
        return _step(n, outcomes[n])

    best, steps = search([1, 2, 4, 6], play, bar_s=2.0)
    assert best == 2
    assert played == [1, 2, 4]  # stops at the first failing step: 6 is never played
    assert [s.n for s in steps] == [1, 2, 4]


def test_a_timeout_or_an_unanswered_click_fails_a_fast_step():
    fast = [0.5, 0.6, 0.7]
    assert _step(1, fast).passes(2.0)
    assert not _step(1, fast, {0: "accepted", 1: "timeout", 2: "accepted"}).passes(2.0)
    assert not _step(1, fast, {0: "accepted", 1: "internal_error", 2: "accepted"}).passes(2.0)
    assert not _step(1, fast, errors=["run 7: no verdict in 90 s"]).passes(2.0)
    assert not _step(1, []).passes(2.0)  # no click answered proves nothing
    best, _ = search([1, 2], lambda n: _step(n, fast, {0: "timeout"}), bar_s=2.0)
    assert best == 0


def test_the_table_gives_every_latency_in_seconds_and_proc_units():
    step = _step(3, [1.0, 1.2, 2.0])
    step.acks_ms = [40.0, 80.0]
    step.verdicts[2] = "timeout"
    text = table([step], {"proc": 0.4, "loop": 0.5})
    row = text.splitlines()[-1]
    assert row.startswith("| 3 | 0 s | 3 | 1.20 s = 3.00 proc | 2.00 s = 5.00 proc "
                          "| 2.00 s = 5.00 proc")
    assert "| 1 | 0 | 0 |" in row  # one timeout, no other verdict, no lost click
    assert row.endswith("| 0.08 s = 0.20 proc |")
    assert "s = " not in table([step], {}).splitlines()[-1]  # units not measured: seconds
