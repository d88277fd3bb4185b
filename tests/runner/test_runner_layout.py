"""The runner's folders say what is trusted: the candidate's side (runner/candidate) never
imports the grader's code (sim/, gpu/, sandbox/) nor torch, whatever it imports through
the shared modules; the simulated track's grader lives in runner/sim, the GPU track's in
runner/gpu, and neither track imports the other."""

import ast
from pathlib import Path

RUNNER = Path(__file__).resolve().parents[2] / "runner"


def _module_file(name: str) -> Path | None:
    parts = name.split(".")
    if parts[0] != "runner":
        return None
    base = RUNNER.joinpath(*parts[1:])
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            for alias in node.names:  # `from runner import sim` is the module runner.sim
                if _module_file(f"{node.module}.{alias.name}"):
                    found.add(f"{node.module}.{alias.name}")
    return found


ABOVE_THE_TRACKS = {"runner.tracks", "runner.cli"}  # pick a track: may name both


def _closure(start: list[str]) -> set[str]:
    seen: set[str] = set()
    todo = list(start)
    while todo:
        name = todo.pop()
        if name in seen or name in ABOVE_THE_TRACKS:
            continue
        seen.add(name)
        path = _module_file(name)
        if path is not None:
            todo.extend(_imports(path))
    return seen


def test_the_candidates_side_never_imports_the_graders_code_or_torch():
    start = [f"runner.candidate.{p.stem}" for p in (RUNNER / "candidate").glob("*.py")]
    reached = _closure([name.removesuffix(".__init__") for name in start])
    trusted = sorted(
        name for name in reached
        if name.startswith(("runner.sim", "runner.gpu", "runner.sandbox"))
        or name.split(".")[0] in ("torch", "looptime", "numpy")
    )
    assert trusted == [], trusted


def test_the_simulated_track_lives_in_sim_and_neither_track_imports_the_other():
    for moved in ("grading", "host", "clock", "parallel", "trace"):
        assert (RUNNER / "sim" / f"{moved}.py").is_file()
        assert not (RUNNER / f"{moved}.py").exists()
    assert not {p.name for p in RUNNER.glob("gpu_*.py")}
    sim = _closure([f"runner.sim.{p.stem}" for p in (RUNNER / "sim").glob("*.py")])
    gpu = _closure([f"runner.gpu.{p.stem}" for p in (RUNNER / "gpu").glob("*.py")])
    assert not [n for n in sim if n.startswith("runner.gpu")]
    assert not [n for n in gpu if n.startswith("runner.sim")]
