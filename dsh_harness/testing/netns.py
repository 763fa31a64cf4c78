"""A network namespace of its own, for tests and demos run by an ordinary user.

Some test servers must listen on a privileged port (the reviewer's sandbox GitHub on port 80,
which the real github-mcp-server always dials). Root or ``CAP_NET_BIND_SERVICE`` can bind it
directly. Where the kernel allows unprivileged user namespaces, an ordinary user instead runs
the program inside a new user namespace that maps it to root and a new network namespace with
only a loopback interface: binding port 80 there needs no privilege on the machine, and nothing
inside can reach (or be reached from) any other network.

    python -m dsh_harness.testing.netns PROGRAM [ARG ...]

brings the namespace's loopback up and replaces itself with ``PROGRAM``; ``isolated_argv``
builds the whole ``unshare`` command line. Inside, ``DSH_NETNS=1`` says which path ran.
"""

from __future__ import annotations

import fcntl
import functools
import os
import shutil
import socket
import struct
import subprocess
import sys

ENV_FLAG = "DSH_NETNS"
# ioctl numbers and flag of <linux/sockios.h> / <net/if.h>.
SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1


def inside() -> bool:
    """Whether this process runs in a namespace made by ``isolated_argv``."""
    return os.environ.get(ENV_FLAG) == "1"


def user_namespace_root() -> bool:
    """Root only inside a user namespace (uid 0 maps to an ordinary user outside): programs
    that refuse root (PostgreSQL) can run as another uid of a nested namespace, and
    ``runuser`` to a system account is not possible."""
    if os.geteuid() != 0:
        return False
    try:
        with open("/proc/self/uid_map", encoding="ascii") as fh:
            rows = [line.split() for line in fh if line.strip()]
    except OSError:
        return False
    return any(row[0] == "0" and row[1] != "0" for row in rows if len(row) == 3)


@functools.cache
def available(python: str | None = None) -> bool:
    """Whether this user may make a user and network namespace here (``unshare`` present and
    the kernel allowing unprivileged user namespaces) and run ``python`` (default this one)
    inside it: privileges that let a process reach its interpreter outside (e.g. a venv under
    a root-only directory) do not carry into a new user namespace."""
    if shutil.which("unshare") is None:
        return False
    try:
        done = subprocess.run(["unshare", "--user", "--map-root-user", "--net",
                               python or sys.executable, "-c", ""],
                              capture_output=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


def isolated_argv(argv: list[str], python: str | None = None) -> list[str]:
    """The command line that runs ``argv`` in a new user and network namespace, loopback up
    (``python``, default this one, brings it up)."""
    return ["unshare", "--user", "--map-root-user", "--net", "--",
            python or sys.executable, "-m", "dsh_harness.testing.netns", *argv]


def bring_loopback_up() -> None:
    """``ip link set lo up`` without iproute2: a new network namespace starts with it down."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        request = struct.pack("16sH14s", b"lo", 0, b"")
        flags = struct.unpack("16sH14s", fcntl.ioctl(s, SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack("16sH14s", b"lo", flags | IFF_UP, b""))


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args:
        print("usage: python -m dsh_harness.testing.netns PROGRAM [ARG ...]", file=sys.stderr)
        return 2
    try:
        bring_loopback_up()
    except OSError as exc:
        print(f"dsh: cannot bring up the namespace's loopback: {exc}", file=sys.stderr)
        return 1
    os.environ[ENV_FLAG] = "1"
    try:
        os.execvp(args[0], args)
    except OSError as exc:
        print(f"dsh: cannot run {args[0]}: {exc}", file=sys.stderr)
        return 127
    return 0  # not reached


if __name__ == "__main__":
    raise SystemExit(main())
