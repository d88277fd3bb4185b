"""Control groups for the bwrap and process backends: memory, processes and CPU per run.

Works with cgroup v2 (one unified tree) and v1 (one tree per controller). Creating groups
needs root or a delegated subtree; where that is impossible `Cgroup.create` returns None
and the backends fall back to rlimits, saying so in the result.
"""

import contextlib
import os
import signal
import time
from pathlib import Path

ROOT = Path(os.environ.get("OVERLAP_CGROUP_ROOT", "/sys/fs/cgroup"))
GROUP = "overlap-sandbox"
V1_CONTROLLERS = ("memory", "pids", "cpu")
CPU_PERIOD_US = 100_000


def _write(path: Path, value: str) -> None:
    with open(path, "w") as handle:
        handle.write(value)


def _counter(path: Path, key: str) -> int:
    with contextlib.suppress(OSError, ValueError):
        for line in path.read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == key:
                return int(value)
    return 0


def _is_v2() -> bool:
    return (ROOT / "cgroup.controllers").exists()


class Cgroup:
    """One run's group(s); `paths` has one entry on v2 and one per controller on v1."""

    def __init__(self, name: str, paths: dict[str, Path]):
        self.name = name
        self.paths = paths

    @classmethod
    def create(cls, name: str, memory_bytes: int, processes: int, cpus: float):
        try:
            group = cls._make(name)
            group._set_limits(memory_bytes, processes, cpus)
            return group
        except OSError:
            with contextlib.suppress(Exception):
                group.remove()  # type: ignore[possibly-undefined]
            return None

    @classmethod
    def _make(cls, name: str) -> "Cgroup":
        if _is_v2():
            parent = ROOT / GROUP
            if not parent.exists():
                parent.mkdir()
            wanted = {"memory", "pids", "cpu"}
            available = set((ROOT / "cgroup.controllers").read_text().split())
            if not wanted <= available:
                raise OSError("cgroup v2 lacks the memory, pids or cpu controller")
            for path in (ROOT, parent):
                enabled = set((path / "cgroup.subtree_control").read_text().split())
                if not wanted <= enabled:
                    _write(path / "cgroup.subtree_control", " ".join("+" + c for c in wanted))
            path = parent / name
            path.mkdir()
            return cls(name, {"unified": path})
        paths = {}
        group = cls(name, paths)
        for controller in V1_CONTROLLERS:
            base = ROOT / controller
            if not base.is_dir():
                raise OSError(f"cgroup v1 controller {controller} is not mounted")
            path = base / GROUP / name
            path.mkdir(parents=True)
            paths[controller] = path
        return group

    def _set_limits(self, memory_bytes: int, processes: int, cpus: float) -> None:
        quota = str(max(1000, int(cpus * CPU_PERIOD_US)))
        if "unified" in self.paths:
            path = self.paths["unified"]
            _write(path / "memory.max", str(memory_bytes))
            with contextlib.suppress(OSError):
                _write(path / "memory.swap.max", "0")
            _write(path / "pids.max", str(processes))
            _write(path / "cpu.max", f"{quota} {CPU_PERIOD_US}")
            return
        memory = self.paths["memory"]
        _write(memory / "memory.limit_in_bytes", str(memory_bytes))
        with contextlib.suppress(OSError):  # only with swap accounting
            _write(memory / "memory.memsw.limit_in_bytes", str(memory_bytes))
        with contextlib.suppress(OSError):
            _write(memory / "memory.swappiness", "0")
        _write(self.paths["pids"] / "pids.max", str(processes))
        _write(self.paths["cpu"] / "cpu.cfs_period_us", str(CPU_PERIOD_US))
        _write(self.paths["cpu"] / "cpu.cfs_quota_us", quota)

    def add(self, pid: int) -> None:
        for path in self.paths.values():
            _write(path / "cgroup.procs", str(pid))

    def pids(self) -> set[int]:
        found = set()
        for path in self.paths.values():
            with contextlib.suppress(OSError, ValueError):
                found.update(int(line) for line in (path / "cgroup.procs").read_text().split())
        return found

    def oom_kills(self) -> int:
        if "unified" in self.paths:
            return _counter(self.paths["unified"] / "memory.events", "oom_kill")
        return _counter(self.paths["memory"] / "memory.oom_control", "oom_kill")

    def pids_max_events(self) -> int:
        path = self.paths.get("unified") or self.paths["pids"]
        return _counter(path / "pids.events", "max")

    def kill_all(self, timeout_s: float = 5.0) -> bool:
        """SIGKILL everything in the group until it is empty; False if it would not empty."""
        unified = self.paths.get("unified")
        if unified is not None and (unified / "cgroup.kill").exists():
            with contextlib.suppress(OSError):
                _write(unified / "cgroup.kill", "1")
        deadline = time.monotonic() + timeout_s
        while True:
            pids = self.pids()
            if not pids:
                return True
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            if time.monotonic() > deadline:
                return False
            time.sleep(0.005)

    def remove(self) -> None:
        self.kill_all()
        for path in self.paths.values():
            for _ in range(100):
                try:
                    path.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.01)  # the last killed processes are still exiting


def leftover_names() -> list[str]:
    """Names of the run groups that exist now (for the reaper)."""
    bases = [ROOT / GROUP] if _is_v2() else [ROOT / c / GROUP for c in V1_CONTROLLERS]
    names = set()
    for base in bases:
        with contextlib.suppress(OSError):
            names.update(p.name for p in base.iterdir() if p.is_dir())
    return sorted(names)


def attach_existing(name: str) -> "Cgroup":
    if _is_v2():
        return Cgroup(name, {"unified": ROOT / GROUP / name})
    paths = {c: ROOT / c / GROUP / name for c in V1_CONTROLLERS}
    return Cgroup(name, {c: p for c, p in paths.items() if p.exists()})
