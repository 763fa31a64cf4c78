"""A throwaway PostgreSQL cluster for tests and benches: ``initdb`` in a temporary directory,
a server on a free loopback port, stopped and deleted by ``stop``.

Written over the distribution's ``initdb``/``pg_ctl`` rather than pytest-postgresql because
the server refuses to run as root (the test machines' user): as root the cluster is created and
run as the ``postgres`` system user, which pytest-postgresql cannot do. The server listens on
127.0.0.1 only, with ``trust`` authentication, and trades durability for speed (``fsync=off``):
it holds nothing that must outlive the test run.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

# Where Debian puts the server binaries (``/usr/lib/postgresql/<major>/bin``); not on PATH.
DEBIAN_BIN_GLOB = "/usr/lib/postgresql/*/bin"
SERVER_USER = "postgres"


def _nested_ids() -> tuple[int, int]:
    """The uid and gid the server runs as in a nested user namespace: initdb needs a name for
    its effective uid, so an account this machine has — the postgres one, else any non-root."""
    try:
        entry = pwd.getpwnam(SERVER_USER)
    except KeyError:
        entry = next(e for e in pwd.getpwall() if e.pw_uid != 0)
    return entry.pw_uid, entry.pw_gid


class PostgresUnavailable(RuntimeError):
    """No PostgreSQL server binary on this machine (the reason says what was looked for)."""


def find_bin_dir() -> Path:
    """The directory holding ``initdb`` and ``pg_ctl``: ``$DSH_PG_BIN``, then PATH, then the
    newest Debian major version."""
    explicit = os.environ.get("DSH_PG_BIN")
    candidates: list[Path] = [Path(explicit)] if explicit else []
    on_path = shutil.which("initdb")
    if on_path:
        candidates.append(Path(on_path).parent)

    def major(path: str) -> int:
        try:
            return int(Path(path).parent.name.split(".")[0])
        except ValueError:
            return 0
    candidates += [Path(p) for p in sorted(glob.glob(DEBIAN_BIN_GLOB), key=major, reverse=True)]
    for directory in candidates:
        if (directory / "initdb").is_file() and (directory / "pg_ctl").is_file():
            return directory
    raise PostgresUnavailable(
        "no PostgreSQL server binary found (looked for initdb and pg_ctl in $DSH_PG_BIN, on "
        f"PATH and in {DEBIAN_BIN_GLOB}); scripts/install-postgres installs Debian's packages")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PostgresCluster:
    """``start()`` creates and starts the cluster; ``stop()`` stops it and removes its files."""

    def __init__(self, bin_dir: Path | None = None):
        self.bin_dir = bin_dir or find_bin_dir()
        self.directory: Path | None = None
        self.port = 0
        self.user = SERVER_USER
        self._run_as: list[str] = []
        self._started = False

    @property
    def data(self) -> Path:
        assert self.directory is not None
        return self.directory / "data"

    def dsn(self, dbname: str = "postgres") -> str:
        return f"postgresql://{self.user}@127.0.0.1:{self.port}/{dbname}"

    def _cmd(self, *args: str) -> list[str]:
        return [*self._run_as, *args]

    def start(self) -> PostgresCluster:
        self.directory = Path(tempfile.mkdtemp(prefix="dsh-pg-"))
        try:
            # Imported here: ``python -m dsh_harness.testing.netns`` must not find its own
            # module already imported through this package.
            from .netns import user_namespace_root
            if user_namespace_root():
                # Root only inside a user namespace (an ordinary user's test run, see
                # ``netns``): the server refuses uid 0 and no system account is mapped, so it
                # runs as another uid of a nested namespace (the same user outside).
                uid, gid = _nested_ids()
                self._run_as = ["unshare", f"--map-user={uid}", f"--map-group={gid}", "--"]
            elif os.geteuid() == 0:
                # The server refuses root: the cluster belongs to the postgres system user.
                entry = pwd.getpwnam(SERVER_USER)
                os.chown(self.directory, entry.pw_uid, entry.pw_gid)
                self._run_as = ["runuser", "-u", SERVER_USER, "--"]
            subprocess.run(self._cmd(str(self.bin_dir / "initdb"), "-D", str(self.data),
                                     "-A", "trust", "-U", self.user, "-E", "UTF8",
                                     "--no-sync"),
                           check=True, capture_output=True, text=True, timeout=120)
            self._start_server()
        except subprocess.CalledProcessError as exc:
            self.stop()
            raise PostgresUnavailable(f"{exc.cmd[len(self._run_as)]} failed: "
                                      f"{(exc.stderr or exc.stdout).strip()[-2000:]}") from None
        except BaseException:
            self.stop()
            raise
        return self

    def _start_server(self) -> None:
        assert self.directory is not None
        last = ""
        for _ in range(5):  # a free port can be taken between the probe and the server's bind
            self.port = free_port()
            if self._pg_ctl_start().returncode == 0:
                self._started = True
                return
            last = self.log_tail()
            time.sleep(0.2)
        raise PostgresUnavailable(f"the PostgreSQL server did not start: {last}")

    def _pg_ctl_start(self) -> subprocess.CompletedProcess[str]:
        assert self.directory is not None
        options = (f"-p {self.port} -k {self.directory} -c listen_addresses=127.0.0.1 "
                   "-c fsync=off -c synchronous_commit=off -c full_page_writes=off "
                   "-c max_connections=200")
        return self.run("pg_ctl", "-D", str(self.data), "-o", options,
                        "-l", str(self.directory / "server.log"), "-w", "-t", "60", "start",
                        timeout=90)

    def log_tail(self) -> str:
        assert self.directory is not None
        try:
            return (self.directory / "server.log").read_text(errors="replace")[-2000:]
        except OSError:
            return ""

    def run(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """Run a server program (``pg_ctl``, ...) from the cluster's bin dir as its owner."""
        return subprocess.run(self._cmd(str(self.bin_dir / args[0]), *args[1:]),
                              capture_output=True, text=True, timeout=timeout)

    def pause(self) -> None:
        """Stop the server, keeping the data (for outage tests); ``resume`` starts it again."""
        self.run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")
        self._started = False

    def resume(self) -> None:
        if self._pg_ctl_start().returncode != 0:
            raise PostgresUnavailable(f"the PostgreSQL server did not restart: {self.log_tail()}")
        self._started = True

    def stop(self) -> None:
        if self.directory is None:
            return
        try:
            if self._started:
                self.run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
                self._started = False
        finally:
            shutil.rmtree(self.directory, ignore_errors=True)
            self.directory = None

    def __enter__(self) -> PostgresCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
