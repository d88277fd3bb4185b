"""The `process` backend: a plain subprocess with rlimits. NOT ISOLATED.

For trying the platform on a machine with neither Docker nor bubblewrap. The run can read
every file this user can, open network connections and see the environment of other
processes. Memory, processes and CPU are bounded by a cgroup when this process may create
one (root), else by rlimits only. Never chosen in production unless asked for.
"""

import contextlib
import os
import shutil

from runner.sandbox import cgroups
from runner.sandbox.backends.base import (
    BOOT,
    PYTHON_FLAGS,
    RUNNER_PARENT,
    Backend,
    SubprocessSandbox,
    child_env,
    new_run_dir,
    pid_alive,
    preload_modules,
    runtime_root,
    sandbox_python,
)
from runner.sandbox.job import Job
from runner.sandbox.limits import Limits

WARNING = (
    "The 'process' sandbox does not isolate the run: it can read this machine's files, "
    "use the network and see other processes. Use it only to try Overlap locally."
)


class ProcessSandbox(SubprocessSandbox):
    def __init__(self, *args, uses_cgroup: bool, **kwargs):
        super().__init__(*args, **kwargs)
        self.uses_cgroup = uses_cgroup

    def prepare(self, job: Job) -> None:
        job.workdir = str(self.run_dir / "job")
        job.tmp_dir = str(self.run_dir / "tmp")
        job.env = child_env(job.limits, job.tmp_dir, str(RUNNER_PARENT))
        limits = job.limits
        job.rlimits = {
            "NOFILE": limits.open_files,
            "FSIZE": limits.disk_bytes,
            "CORE": 0,
        }
        if not self.uses_cgroup:
            # Address space is a coarse stand-in for memory; processes are counted per user.
            job.rlimits["AS"] = limits.memory_bytes + 2 * 1024**3
            job.rlimits["NPROC"] = limits.processes + _user_processes()


def _user_processes() -> int:
    uid = os.getuid()
    count = 0
    for name in os.listdir("/proc"):
        if name.isdigit():
            with contextlib.suppress(OSError):
                count += os.stat(f"/proc/{name}").st_uid == uid
    return count


class ProcessBackend(Backend):
    name = "process"
    isolated = False

    def problem(self) -> str | None:
        return None

    def start(self, limits: Limits, gpu=None, *, preload: bool = False) -> ProcessSandbox:
        run_dir = new_run_dir()
        (run_dir / "tmp").mkdir(mode=0o700)
        group = None
        if os.geteuid() == 0:
            group = cgroups.Cgroup.create(
                run_dir.name, limits.memory_bytes, limits.processes, limits.cpus
            )
        argv = [sandbox_python(), *PYTHON_FLAGS, "-c", BOOT.format(parent=str(RUNNER_PARENT))]
        argv += ["--die-with-parent", "--idle-timeout", "3600"]
        if preload:
            argv += ["--preload", preload_modules(), "--announce"]
        env = child_env(limits, str(run_dir / "tmp"), str(RUNNER_PARENT))
        sandbox = ProcessSandbox(
            self.name, argv, env, run_dir, cgroup=group, uses_cgroup=group is not None
        )
        try:
            sandbox.spawn()
            if group is not None:
                group.add(sandbox.proc.pid)
        except BaseException:
            sandbox.destroy()
            raise
        return sandbox

    def reap(self) -> int:
        return reap_run_dirs()


def reap_run_dirs(unmount=None) -> int:
    """Remove run folders (and their cgroups, mounts) whose owning process is gone."""
    count = 0
    root = runtime_root()
    if not root.is_dir():
        return 0
    for path in root.iterdir():
        pid_text = path.name.partition("-")[0]
        if not pid_text.isdigit() or pid_alive(int(pid_text)):
            continue
        group = cgroups.attach_existing(path.name)
        if group.paths:
            group.remove()
        if unmount is not None:
            unmount(path)
        shutil.rmtree(path, ignore_errors=True)
        count += 1
    for name in cgroups.leftover_names():
        pid_text = name.partition("-")[0]
        if pid_text.isdigit() and not pid_alive(int(pid_text)):
            cgroups.attach_existing(name).remove()
            count += 1
    return count
