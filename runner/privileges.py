"""Who the candidate's processes run as: a user of their own, where the trusted side can
make one.

A process can ``prlimit``, renice, reschedule, pin, signal and (when dumpable) ptrace the
processes of its own uid. So the candidate's processes run under ``CANDIDATE_UID``, a uid
no trusted process has, whenever the process starting them holds the capabilities to
switch users and to signal what it starts (CAP_SETUID, CAP_SETGID, CAP_KILL): root on a
host (``python -m runner grade``, the ``process`` backend as root) and the docker
sandbox's trusted side (uid 0 with exactly those three capabilities). Then the grader,
the fork server's parent and the sandbox's first process are out of the candidate's
reach by construction, and whatever the candidate does to processes of its own uid
touches only itself.

Where the trusted side cannot switch (an unprivileged ``python -m runner grade``, the
bwrap sandbox started by an unprivileged user) the candidate keeps its uid and the other
walls stand alone: non-dumpable trusted processes, Landlock's signal scope, and
``attributes``/``tampered`` below (a run that changed the grader's limits, priority or
scheduling gets a verdict of its own).

Standard library only (the candidate's fork server and the sandbox's first process
import it).
"""

from __future__ import annotations

import contextlib
import functools
import os
import resource
import sys
import sysconfig

DEFAULT_CANDIDATE_UID = 10003
CAP_KILL, CAP_SETGID, CAP_SETUID = 5, 6, 7


def candidate_uid() -> int:
    """The uid candidates' processes take (``OVERLAP_CANDIDATE_UID``, default 10003: on a
    host, pick one that no account and no daemon uses)."""
    value = os.environ.get("OVERLAP_CANDIDATE_UID", "")
    return int(value) if value.isdigit() and int(value) > 0 else DEFAULT_CANDIDATE_UID


def _effective_capabilities() -> int:
    with contextlib.suppress(OSError, ValueError), open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith("CapEff:"):
                return int(line.split()[1], 16)
    return 0


def can_switch() -> bool:
    """Whether this process can start processes under another uid and still kill them."""
    needed = (1 << CAP_KILL) | (1 << CAP_SETGID) | (1 << CAP_SETUID)
    return _effective_capabilities() & needed == needed


def _open_to_others(path: str, last: int) -> bool:
    """Whether a uid with no group and no ownership here can reach ``path`` (search on
    every folder above it) and use it (``last``: the permission bits it needs)."""
    path = os.path.realpath(path)
    parts = path.split("/")
    for depth in range(1, len(parts)):
        folder = "/".join(parts[:depth]) or "/"
        try:
            if not os.stat(folder).st_mode & 0o001:
                return False
        except OSError:
            return False
    try:
        return os.stat(path).st_mode & last == last
    except OSError:
        return False


@functools.cache
def interpreter_open_to_candidate() -> bool:
    """Whether the candidate's user could run this interpreter and import the standard
    library (an interpreter under /root, a pyenv say, is not: there the candidate keeps
    the grader's uid, and runner/README.md says how to give it its own)."""
    stdlib = sysconfig.get_paths()["stdlib"]
    return (
        _open_to_others(sys.executable, 0o005)
        and _open_to_others(stdlib, 0o005)
        and _open_to_others(os.path.join(stdlib, "os.py"), 0o004)
        and _open_to_others(os.path.dirname(os.path.dirname(__file__)), 0o005)
    )


def switch_user() -> dict:
    """``subprocess.Popen`` arguments that start a process as the candidate's user, or
    nothing where this process cannot switch or the candidate could not run Python."""
    if not (can_switch() and interpreter_open_to_candidate()):
        return {}
    uid = candidate_uid()
    return {"user": uid, "group": uid, "extra_groups": []}


def become_candidate() -> bool:
    """Drop this process to the candidate's user for good (every capability goes with
    root). False, and nothing changed, where it cannot switch or the candidate could not
    go on running Python."""
    if not (can_switch() and interpreter_open_to_candidate()):
        return False
    uid = candidate_uid()
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    return True


# -- what a process of the same uid could change of the trusted side ------------------


def attributes(pid: int = 0) -> dict:
    """The limits, priority and scheduling policy of ``pid`` (0: this process): what a
    process of the same uid can lower for good (a lowered hard limit, a raised nice
    value and SCHED_IDLE cannot be taken back without privileges)."""
    found: dict = {}
    seen: set[int] = set()
    for name in sorted(dir(resource)):
        number = getattr(resource, name)
        if name.startswith("RLIMIT_") and number not in seen:  # OFILE is NOFILE
            seen.add(number)
            with contextlib.suppress(OSError, ValueError):
                found[name] = resource.prlimit(pid, number)
    with contextlib.suppress(OSError):
        found["nice"] = os.getpriority(os.PRIO_PROCESS, pid)
    with contextlib.suppress(OSError, AttributeError):
        found["scheduler"] = os.sched_getscheduler(pid)
    return found


def tampered(before: dict, pid: int = 0) -> list[str]:
    """What changed in ``pid``'s attributes since ``before`` (names, sorted)."""
    now = attributes(pid)
    return sorted(name for name in set(before) | set(now) if before.get(name) != now.get(name))


def restore(before: dict, names: list[str]) -> None:
    """Put this process's ``names`` back as in ``before``, as far as it may (lowered hard
    limits, a raised nice value and SCHED_IDLE come back only with privileges)."""
    for name in names:
        value = before.get(name)
        with contextlib.suppress(OSError, ValueError, AttributeError, TypeError):
            if name.startswith("RLIMIT_"):
                resource.setrlimit(getattr(resource, name), value)
            elif name == "nice":
                os.setpriority(os.PRIO_PROCESS, 0, value)
            elif name == "scheduler":
                os.sched_setscheduler(0, value, os.sched_param(0))
