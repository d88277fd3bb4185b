"""The `bwrap` backend: bubblewrap namespaces, for hosts without Docker.

Every run gets new user, pid, network, ipc, uts and mount namespaces (no network at all,
only loopback inside), a root made of read-only binds of what Python needs (/usr, the
interpreter's prefixes, the runner package) and nothing else of the host, a private /tmp,
a new session, and it dies with its parent. Memory, processes and CPU are bounded by a
cgroup (root), and /tmp by a size-capped tmpfs (root); without root, rlimits stand in.
"""

import contextlib
import ctypes
import json
import os
import select
import shutil
import subprocess
import time
from functools import cache
from pathlib import Path

from runner.sandbox import cgroups
from runner.sandbox.backends.base import (
    BOOT,
    PYTHON_FLAGS,
    RUNNER_PARENT,
    SANDBOX_UID,
    Backend,
    SandboxUnavailable,
    SubprocessSandbox,
    child_env,
    interpreter_layout,
    new_run_dir,
    preload_modules,
    sandbox_python,
)
from runner.sandbox.backends.process import reap_run_dirs
from runner.sandbox.job import Job
from runner.sandbox.limits import Limits

INSIDE_RUNNER_PARENT = "/opt/overlap"
SYSTEM_DIRS = ("/usr",)
TOP_LEVEL_LINKS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
ETC_FILES = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "localtime")
MS_NOSUID, MS_NODEV = 2, 4
MNT_DETACH = 2


def bwrap_path() -> str | None:
    return os.environ.get("OVERLAP_BWRAP") or shutil.which("bwrap")


def _mount_tmpfs(path: Path, size_bytes: int) -> bool:
    libc = ctypes.CDLL(None, use_errno=True)
    options = f"size={size_bytes},mode=1777".encode()
    flags = MS_NOSUID | MS_NODEV
    return libc.mount(b"tmpfs", str(path).encode(), b"tmpfs", flags, options) == 0


def _unmount(path: Path) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.umount2(str(path).encode(), MNT_DETACH)


def _unmount_run_dir(run_dir: Path) -> None:
    tmp = run_dir / "tmp"
    if os.path.ismount(tmp):
        _unmount(tmp)


class BwrapSandbox(SubprocessSandbox):
    def __init__(self, *args, uses_cgroup: bool, **kwargs):
        super().__init__(*args, **kwargs)
        self.uses_cgroup = uses_cgroup

    def prepare(self, job: Job) -> None:
        job.workdir = "/tmp/job"
        job.tmp_dir = "/tmp"
        job.env = child_env(job.limits, "/tmp", INSIDE_RUNNER_PARENT)
        limits = job.limits
        job.rlimits = {"NOFILE": limits.open_files, "FSIZE": limits.disk_bytes, "CORE": 0}
        if not self.uses_cgroup:
            # In its own user namespace the run's processes are counted apart from the
            # host's; address space is a coarse stand-in for memory.
            job.rlimits["NPROC"] = limits.processes
            job.rlimits["AS"] = limits.memory_bytes + 2 * 1024**3


class BwrapBackend(Backend):
    name = "bwrap"
    isolated = True

    def problem(self) -> str | None:
        return _probe(bwrap_path())

    def start(self, limits: Limits, gpu=None, *, preload: bool = False) -> BwrapSandbox:
        binary = bwrap_path()
        problem = _probe(binary)
        if problem:
            raise SandboxUnavailable(problem)
        run_dir = new_run_dir()
        tmp = run_dir / "tmp"
        tmp.mkdir(mode=0o1777)
        os.chmod(tmp, 0o1777)
        sized_tmp = os.geteuid() == 0 and _mount_tmpfs(tmp, limits.disk_bytes + 1024 * 1024)
        group = None
        if os.geteuid() == 0:
            group = cgroups.Cgroup.create(
                run_dir.name, limits.memory_bytes, limits.processes, limits.cpus
            )
        python = sandbox_python()
        argv = _bwrap_argv(binary, python, run_dir, sized_tmp, gpu)
        argv += [python, *PYTHON_FLAGS, "-c", BOOT.format(parent=INSIDE_RUNNER_PARENT)]
        argv += ["--idle-timeout", "3600"]
        if preload:
            argv += ["--preload", preload_modules(), "--announce"]
        env = child_env(limits, "/tmp", INSIDE_RUNNER_PARENT)
        cleanups = [lambda: _unmount_run_dir(run_dir)] if sized_tmp else []
        sandbox = BwrapSandbox(
            self.name,
            argv,
            env,
            run_dir,
            cgroup=group,
            cleanups=cleanups,
            uses_cgroup=group is not None,
        )
        info_r, info_w = os.pipe()
        try:
            sandbox.argv = [argv[0], "--info-fd", str(info_w), *argv[1:]]
            sandbox.spawn(pass_fds=(info_w,))
            os.close(info_w)
            info_w = -1
            child = _child_pid(info_r, sandbox)
            if group is not None:
                group.add(sandbox.proc.pid)
                group.add(child)
        except ProcessLookupError:
            sandbox.destroy()
            raise SandboxUnavailable("bwrap ended before its sandbox started") from None
        except BaseException:
            sandbox.destroy()
            raise
        finally:
            os.close(info_r)
            if info_w >= 0:
                os.close(info_w)
        return sandbox

    def reap(self) -> int:
        return reap_run_dirs(unmount=_unmount_run_dir)


def _child_pid(info_fd: int, sandbox: BwrapSandbox, timeout_s: float = 10.0) -> int:
    """The sandboxed process's pid, as bwrap reports it on --info-fd."""
    data = b""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if select.select([info_fd], [], [], 0.1)[0]:
            chunk = os.read(info_fd, 4096)
            if not chunk:
                break
            data += chunk
            with contextlib.suppress(ValueError):
                return int(json.loads(data)["child-pid"])
    why = b""
    if sandbox.proc is not None and sandbox.proc.poll() is not None:
        why = sandbox.proc.stderr.read(2000)
    raise SandboxUnavailable(f"bwrap did not start: {why.decode(errors='replace').strip()}")


def _bwrap_argv(binary: str, python: str, run_dir: Path, sized_tmp: bool, gpu) -> list[str]:
    argv = [binary, *_identity(), "--hostname",
        "sandbox",
        "--die-with-parent",
        "--new-session",
        "--as-pid-1",
        *_capabilities(),
        "--proc",
        "/proc",
        "--dev",
        "/dev",
    ]
    for path in SYSTEM_DIRS:
        argv += ["--ro-bind", path, path]
    for path in TOP_LEVEL_LINKS:
        if os.path.islink(path):
            argv += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            argv += ["--ro-bind", path, path]
    for name in ETC_FILES:
        if os.path.exists(f"/etc/{name}"):
            argv += ["--ro-bind", f"/etc/{name}", f"/etc/{name}"]
    (run_dir / "passwd").write_text(f"sandbox:x:{SANDBOX_UID}:{SANDBOX_UID}::/tmp:/bin/false\n")
    (run_dir / "group").write_text(f"sandbox:x:{SANDBOX_UID}:\n")
    argv += ["--ro-bind", str(run_dir / "passwd"), "/etc/passwd"]
    argv += ["--ro-bind", str(run_dir / "group"), "/etc/group"]
    if sized_tmp:
        argv += ["--bind", str(run_dir / "tmp"), "/tmp"]
    else:
        argv += ["--tmpfs", "/tmp"]
    # After /tmp is mounted: an interpreter or a checkout living under /tmp (a CI clone,
    # say) would otherwise be hidden by the sandbox's own /tmp.
    binds = [
        (prefix, prefix) for prefix in interpreter_layout(python)["prefixes"]
        if not any(prefix == d or prefix.startswith(d + "/") for d in SYSTEM_DIRS)
    ] + [(str(RUNNER_PARENT / "runner"), f"{INSIDE_RUNNER_PARENT}/runner")]
    if os.geteuid() == 0:
        argv += _open_parents([target for _source, target in binds])
    for source, target in binds:
        argv += ["--ro-bind", source, target]
    argv += _gpu_binds(gpu)
    # The root bwrap builds is a tmpfs: read-only, so /tmp is the only writable place.
    argv += ["--remount-ro", "/", "--chdir", "/tmp", "--"]
    return argv


# Started by root, the sandbox's trusted side (its first process, the grader) keeps uid 0
# with exactly the capabilities it needs to start the candidate's processes under a uid
# of their own and to kill them (runner.privileges), in new pid, network, ipc, uts and
# mount namespaces but not a user namespace (one maps a single uid: there would be no
# second). Started by anyone else, the whole sandbox is one unprivileged uid in a user
# namespace, and the grader's own checks stand in (runner/README.md, "Users").
TRUSTED_CAPS = ("CAP_SETUID", "CAP_SETGID", "CAP_KILL")


def _open_parents(targets: list[str]) -> list[str]:
    """Folders above the binds, made 0755 (bwrap makes them 0700): the candidate's own uid
    must reach the interpreter, the standard library and the runner (a pyenv under
    /root, say, whose folders on the host only root may enter)."""
    argv: list[str] = []
    made: set[str] = set()
    for target in targets:
        parts = target.strip("/").split("/")[:-1]
        for depth in range(1, len(parts) + 1):
            folder = "/" + "/".join(parts[:depth])
            if folder in made or folder in SYSTEM_DIRS or folder == "/tmp":
                continue
            made.add(folder)
            argv += ["--perms", "0755", "--dir", folder]
    return argv


def _identity() -> list[str]:
    if os.geteuid() == 0:
        return ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts",
                "--unshare-cgroup-try", "--uid", "0", "--gid", "0"]
    return ["--unshare-all", "--unshare-user", "--uid", str(SANDBOX_UID),
            "--gid", str(SANDBOX_UID)]


def _capabilities() -> list[str]:
    argv = ["--cap-drop", "ALL"]
    if os.geteuid() == 0:
        for cap in TRUSTED_CAPS:
            argv += ["--cap-add", cap]
    return argv


def _gpu_binds(gpu) -> list[str]:
    if not gpu:
        return []
    binds = []
    for name in sorted(os.listdir("/dev")):
        if name.startswith("nvidia"):
            number = name[len("nvidia") :]
            if number.isdigit() and gpu != "all" and number not in {str(g) for g in gpu}:
                continue
            binds += ["--dev-bind", f"/dev/{name}", f"/dev/{name}"]
    return binds


@cache
def _probe(binary: str | None) -> str | None:
    if not binary:
        return "bubblewrap is not installed (apt-get install bubblewrap)"
    try:
        proc = subprocess.run(
            [binary, "--unshare-all", "--unshare-user", "--ro-bind", "/usr", "/usr"]
            + [
                arg
                for link in TOP_LEVEL_LINKS
                if os.path.islink(link)
                for arg in ("--symlink", os.readlink(link), link)
            ]
            + ["--proc", "/proc", "--dev", "/dev", "--", "/usr/bin/true"],
            capture_output=True,
            timeout=20,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bubblewrap cannot start: {exc}"
    if proc.returncode != 0:
        return f"bubblewrap cannot create namespaces here: {proc.stderr.decode()[:300].strip()}"
    return None
