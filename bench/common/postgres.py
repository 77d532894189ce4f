"""A throwaway PostgreSQL server from the system's binaries, for tests and benchmarks.

``PostgresServer.start()`` runs ``initdb`` into a fresh temporary directory and ``pg_ctl start``
on a free loopback port (TCP only, trust authentication for the ``postgres`` role, nothing else
listens). PostgreSQL refuses to run as root: as root, every command runs as the unprivileged
``postgres`` account Debian's ``postgresql`` package creates (``runuser``), and the directory
is handed to it. ``database()`` creates an empty database and returns its URL; ``role()``
creates a login role (with a password the server then requires of it alone); ``stop`` and
``start`` stop and start the same cluster (its data kept); ``destroy`` removes everything.

``PostgresServer.attach(server.address())`` is another process's handle on a running server
(the mutation harness starts one for all its mutants and names it in ``NEARDUP_TEST_POSTGRES``,
which the tests' ``postgres`` fixture honours): its ``destroy`` drops only the databases it made.
"""

from __future__ import annotations

import atexit
import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

from bench.common.server import HOST, free_port

__all__ = ["SHARED", "PostgresServer", "binaries"]

_ACCOUNT = "postgres"
#: the environment variable that names a running server for the tests (``address()``)
SHARED = "NEARDUP_TEST_POSTGRES"


def binaries() -> Path:
    """The newest ``/usr/lib/postgresql/*/bin`` holding ``initdb`` (RuntimeError if none)."""
    versions = [Path(p).parent.parent for p in glob.glob("/usr/lib/postgresql/*/bin/initdb")]
    found = sorted((v for v in versions if v.name.isdigit()), key=lambda v: int(v.name))
    if not found:
        raise RuntimeError(
            "PostgreSQL's server binaries are missing (no /usr/lib/postgresql/*/bin/initdb): "
            "`make test` installs Debian's postgresql, or run: apt-get install postgresql"
        )
    return found[-1] / "bin"


class PostgresServer:
    """One PostgreSQL cluster in a temporary directory, on ``port``.

    Args:
        fsync: flush to disk as a production server does (the benchmarks); the tests turn it
            off for speed (commits still wait for the WAL write, and the tests stop the server
            cleanly, never the machine).
    """

    def __init__(self, fsync: bool = True) -> None:
        self._setup(Path(tempfile.mkdtemp(prefix="neardup-pg-")), free_port(), fsync, owner=True)
        if self._as_root:
            account = pwd.getpwnam(_ACCOUNT)
            os.chown(self.root, account.pw_uid, account.pw_gid)
        try:
            self._run("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust",
                      "--no-locale", "-E", "UTF8", "--no-sync")  # fmt: skip
        except BaseException:
            shutil.rmtree(self.root, ignore_errors=True)
            raise

    def _setup(self, root: Path, port: int, fsync: bool, owner: bool) -> None:
        self.fsync = fsync
        self.bin = binaries()
        self.root = root
        self.data = self.root / "data"
        self.logfile = self.root / "postgres.log"
        self.port = port
        self._as_root = os.geteuid() == 0
        self._owner = owner
        self._made: list[str] = []  # the databases this handle created

    def address(self) -> str:
        """``PORT:DIRECTORY``, what ``attach`` takes."""
        return f"{self.port}:{self.root}"

    @classmethod
    def attach(cls, address: str, fsync: bool = False) -> PostgresServer:
        """A handle on the running server that ``address`` names (``address()`` of the process
        that owns it), started again if a test left it stopped; its ``destroy`` drops the
        databases it made and leaves the server to its owner."""
        port, root = address.split(":", 1)
        server = cls.__new__(cls)
        server._setup(Path(root), int(port), fsync, owner=False)
        if server._run("pg_ctl", "-D", str(server.data), "status", check=False).returncode:
            server.start()
        return server

    def _run(self, tool: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        cmd = [str(self.bin / tool), *args]
        if self._as_root:
            cmd = ["runuser", "-u", _ACCOUNT, "--", *cmd]
        done = subprocess.run(cmd, capture_output=True, text=True, cwd=self.root)
        if check and done.returncode != 0:
            raise RuntimeError(
                f"{tool} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}\n{self.log()}"
            )
        return done

    def log(self, lines: int = 30) -> str:
        """The end of the server's log."""
        try:
            return "\n".join(self.logfile.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def start(self) -> PostgresServer:
        """Start (or start again) and wait until it accepts connections."""
        options = (
            f"-p {self.port} -c listen_addresses={HOST} -c unix_socket_directories='' "
            "-c max_connections=100 -c synchronous_commit=on "
            f"-c fsync={'on' if self.fsync else 'off'}"
        )
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.logfile), "-w", "-t", "60",
                  "-o", options, "start")  # fmt: skip
        atexit.register(self.destroy)  # even if the caller never gets to (idempotent)
        return self

    def stop(self, mode: str = "fast") -> None:
        """Stop it (``fast``: connections are cut, as a database going away)."""
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop", check=False)

    @property
    def admin_url(self) -> str:
        """The URL of the ``postgres`` database as the superuser."""
        return self.url("postgres")

    def url(self, database: str, user: str = "postgres", password: str | None = None) -> str:
        """``postgresql://USER[:PASSWORD]@127.0.0.1:PORT/DATABASE`` (the password
        percent-encoded)."""
        from urllib.parse import quote

        secret = "" if password is None else f":{quote(password, safe='')}"
        return f"postgresql://{user}{secret}@{HOST}:{self.port}/{database}"

    def role(self, prefix: str = "r", password: str | None = None) -> str:
        """Create a login role with no privilege beyond PUBLIC's; its name. With ``password``,
        the server asks this role (and only it) for that password (scram-sha-256)."""
        import psycopg
        from psycopg import sql

        name = f"{prefix}_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            if password is None:
                conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(name)))
            else:
                conn.execute(
                    sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(
                        sql.Identifier(name), sql.Literal(password)
                    )
                )
                hba = self.data / "pg_hba.conf"
                line = f"host all {name} {HOST}/32 scram-sha-256\n"
                hba.write_text(line + hba.read_text())  # first match wins: before "trust"
                conn.execute("SELECT pg_reload_conf()")
        if password is not None:  # the reload is asynchronous: until it asks for the password
            for _ in range(200):
                try:
                    psycopg.connect(self.url("postgres", name), connect_timeout=5).close()
                except psycopg.OperationalError:
                    break
                time.sleep(0.05)
        return name

    def database(self, prefix: str = "t", owner: str | None = None) -> str:
        """Create an empty database (owned by ``owner``, else the superuser); its URL (as the
        superuser)."""
        import psycopg

        name = f"{prefix}_{uuid.uuid4().hex[:12]}"
        owned = "" if owner is None else f' OWNER "{owner}"'
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}{owned}")
        self._made.append(name)
        return self.url(name)

    def destroy(self) -> None:
        """Stop it at once and remove its directory (once; later calls do nothing). Attached
        (``attach``): drop the databases this handle made instead (the server is its owner's)."""
        if not self._owner:
            self._drop_made()
            return
        if self.data.exists():
            self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)

    def _drop_made(self) -> None:
        import psycopg

        made, self._made = self._made, []
        try:
            with psycopg.connect(self.admin_url, autocommit=True, connect_timeout=10) as conn:
                for name in made:
                    conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        except psycopg.OperationalError:  # stopped by a failed test: the owner removes all
            pass
