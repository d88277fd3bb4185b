"""Benchmark figures come with machine-speed units measured in the same run."""

from runner import units


def test_units_are_measured_by_the_shared_script_and_divide_seconds(tmp_path, monkeypatch):
    script = tmp_path / "plu.py"
    script.write_text("print('loop=0.400 proc=0.250')\n")
    monkeypatch.setattr(units, "SCRIPT", str(script))
    measured = units.measure()
    assert measured == {"loop": 0.4, "proc": 0.25}
    assert units.in_proc(0.5, measured) == "2.00"
    assert "proc=0.250 s" in units.describe(measured)


def test_without_the_script_figures_stay_in_seconds_and_say_so(tmp_path, monkeypatch):
    monkeypatch.setattr(units, "SCRIPT", str(tmp_path / "absent.py"))
    assert units.measure() == {}
    assert units.in_proc(0.5, {}) == ""
    assert "not measured" in units.describe({})
