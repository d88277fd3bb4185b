"""Landlock: a process takes away its own access to the filesystem, the network and
signals to anything outside it, with no privilege needed (Linux 5.13+).

The candidate's process calls :func:`restrict` first thing after its fork: from then on
it can read the standard library and the system's shared libraries (what a lazy
``import json`` needs), ``/dev/null`` and ``/dev/urandom``; nothing else: not ``/proc``
(its own memory), not
the exercise's grader, reference or examples in the job's folder, not the checkout
``python -m runner grade`` runs from, not the platform's files. It can execute nothing,
write no file, bind or connect no TCP socket (ABI 4+), and (ABI 6+, Linux 6.12) signal no
process outside its own domain: not the fork server, the grader or the sandbox's first
process.

Best effort by design: a kernel without Landlock, or a seccomp profile that refuses its
system calls, leaves the process as it was, and :func:`restrict` says which (the other
walls — the sandbox's own namespaces, uid and limits — still hold).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import struct

_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446  # same on x86-64 and arm64
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38

EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_FS_V1 = (1 << 13) - 1  # execute ... make_sym
_REFER, _TRUNCATE, _IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
_NET_BIND_TCP, _NET_CONNECT_TCP = 1 << 0, 1 << 1
_SCOPE_ABSTRACT_UNIX_SOCKET, _SCOPE_SIGNAL = 1 << 0, 1 << 1

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


def abi() -> int:
    """The kernel's Landlock ABI version (0: none, or refused)."""
    version = _libc.syscall(_CREATE_RULESET, None, ctypes.c_size_t(0),
                            ctypes.c_uint32(_CREATE_RULESET_VERSION))
    return max(0, int(version))


def readable_system_paths() -> list[str]:
    """What a candidate's process may read: the standard library and shared libraries.
    Not /proc: a process may always read its own memory there (/proc/self/mem), and the
    runtime's memory holds what the program must not have, the key that seals the run's
    end among it."""
    stdlib = os.path.dirname(os.__file__)
    return [stdlib, "/usr/lib", "/lib", "/usr/lib64", "/lib64", "/usr/local/lib"]


def restrict(
    read_dirs: list[str], read_write_files: tuple[str, ...] = ("/dev/null", "/dev/urandom")
) -> str:
    """Confine this process (and what it forks) as the module says; what was done.

    Returns "landlock ABI n" when applied, or why not ("unavailable: ...")."""
    version = abi()
    if version < 1:
        return f"unavailable: {os.strerror(ctypes.get_errno()) or 'no Landlock'}"
    handled_fs = _FS_V1
    if version >= 2:
        handled_fs |= _REFER
    if version >= 3:
        handled_fs |= _TRUNCATE
    if version >= 5:
        handled_fs |= _IOCTL_DEV
    handled_net = (_NET_BIND_TCP | _NET_CONNECT_TCP) if version >= 4 else 0
    scoped = (_SCOPE_ABSTRACT_UNIX_SOCKET | _SCOPE_SIGNAL) if version >= 6 else 0
    if version >= 6:
        attr = struct.pack("=QQQ", handled_fs, handled_net, scoped)
    elif version >= 4:
        attr = struct.pack("=QQ", handled_fs, handled_net)
    else:
        attr = struct.pack("=Q", handled_fs)
    buffer = ctypes.create_string_buffer(attr, len(attr))
    ruleset = _libc.syscall(_CREATE_RULESET, buffer, ctypes.c_size_t(len(attr)),
                            ctypes.c_uint32(0))
    if ruleset < 0:
        return f"unavailable: {os.strerror(ctypes.get_errno())}"
    try:
        for path in read_dirs:
            _allow(ruleset, path, READ_FILE | READ_DIR, directory=True)
        for path in read_write_files:
            _allow(ruleset, path, READ_FILE | WRITE_FILE, directory=False)
        if _libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            return f"unavailable: no_new_privs: {os.strerror(ctypes.get_errno())}"
        if _libc.syscall(_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0)) != 0:
            return f"unavailable: {os.strerror(ctypes.get_errno())}"
    finally:
        os.close(ruleset)
    return f"landlock ABI {version}"


def _allow(ruleset: int, path: str, access: int, *, directory: bool) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return  # not on this system: nothing to allow
    try:
        if os.path.isdir(path) != directory:
            return
        rule = ctypes.create_string_buffer(struct.pack("=Qi", access, fd), 12)
        with contextlib.suppress(OSError):
            _libc.syscall(_ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(_RULE_PATH_BENEATH),
                          rule, ctypes.c_uint32(0))
    finally:
        os.close(fd)
