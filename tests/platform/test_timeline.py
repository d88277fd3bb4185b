from runs.timeline import timeline_svg

TRACE = {
    "baseline": {"lanes": ["worker 0", "validator"], "makespan": 4.0, "truncated": 0,
                 "spans": [{"lane": "worker 0", "op": "compute", "start": 0, "end": 2,
                            "batch": "0"},
                           {"lane": "validator", "op": "validate", "start": 2, "end": 4,
                            "batch": None, "blocking": True}]},
    "candidate": {"lanes": ["worker 0", "validator"], "makespan": 2.0, "truncated": 0,
                  "spans": [{"lane": "worker 0", "op": "compute", "start": 0, "end": 2,
                             "batch": "0"},
                            {"lane": "validator", "op": "validate", "start": 0, "end": 2,
                             "batch": None}]},
}


def test_draws_the_candidate_under_the_baseline_on_one_time_axis():
    svg = timeline_svg(TRACE)
    assert svg.startswith("<svg") and svg.endswith("</svg>")
    assert svg.index("Baseline") < svg.index("Your run")
    assert svg.count("<rect") >= 4 + 2  # four spans and a legend entry per op
    # Same scale: the candidate's 2 s compute is as wide as the baseline's.
    widths = [part.split('width="')[1].split('"')[0] for part in svg.split("<rect")[1:5]]
    assert widths[0] == widths[2]
    assert "blocking" in svg


def test_lane_and_op_names_are_escaped():
    trace = {"baseline": {"lanes": ["<script>x</script>"], "makespan": 1.0,
                          "spans": [{"lane": "<script>x</script>", "op": "<img onerror=1>",
                                     "start": 0, "end": 1}]}}
    svg = timeline_svg(trace)
    assert "<script>" not in svg and "<img" not in svg
    assert "&lt;script&gt;" in svg


def test_nothing_to_draw_gives_nothing():
    assert timeline_svg(None) == ""
    assert timeline_svg({"baseline": None, "candidate": None}) == ""
