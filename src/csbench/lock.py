"""One lock for the whole project: while one driver works in a checkout, no other starts beside it.

A *driver* is what runs csbench's phases in a checkout: ``snakemake`` (its main process), ``dvc repro``,
``scripts/pull.sh`` (``make pull``), ``make repro``, or a user's own ``csbench <phase>`` call. The
driver and every csbench job it starts belong to one *session*, named after the driver process
(kind, host, pid and the process's start time, so a reused pid is never taken for it).

The lock is an ``flock`` on ``.csbench.lock`` at the project root (the folder the drivers run in):

- every member of the running session (the driver, or a keeper process standing in for it, and
  each csbench job) holds it **shared**, so snakemake's parallel jobs never exclude each other;
- a session starts by taking it **exclusively** (possible only when nobody holds it), writes its
  record (kind, pid, command, since when) into the file, and turns its lock into a shared one;
- a process of another session finds the lock held under someone else's record and is refused with
  one line naming that driver: :class:`ProjectLockError`.

The kernel drops an flock when its process dies, so a ``kill -9`` leaves no stale lock; jobs still
running after their driver was killed keep holding it (nothing starts beside an orphaned job), and
the refusal then names them.

How each process finds its session (:func:`this_driver`): a job inherits ``CSBENCH_SESSION`` from
its driver (snakemake sets it in ``workflow/rules/common.smk``, ``make repro`` and ``scripts/pull.sh``
through :func:`hold`); a stage command of a plain ``dvc repro`` (DVC sets ``DVC_STAGE``) belongs to
the ``dvc`` process above it, and the first such command leaves a small keeper process holding the
lock until that ``dvc`` exits (so nothing starts between two stages); any other csbench call is a
session of its own. Snakemake also holds DVC's repository lock (``.dvc/tmp/lock``) while it runs, so
a plain ``dvc repro`` is refused by DVC itself before it removes or restores any output
(:func:`hold_dvc_repo_lock`).

``python -m csbench.lock status`` prints the holder; ``python -m csbench.lock run --kind K -- CMD``
runs a command as a driver session; ``python -m csbench.lock hold --kind K --pid PID`` holds the lock
for process PID (a shell script) and prints the session to export.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import fcntl
import json
import logging
import os
import shlex
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

LOCK_FILE = ".csbench.lock"
SESSION_ENV = "CSBENCH_SESSION"
DVC_LOCK = Path(".dvc/tmp/lock")  # DVC's own repository lock (zc.lockfile: an flock)
# A session being started holds the lock exclusively for a moment (while it writes its record):
# a process arriving then waits this long at most before it decides.
SETTLE_S = 2.0
COMMAND_CHARS = 160  # of a command line in a message


# flock is not supported there (a Lustre mount without -o flock, some FUSE file systems): no lock, a warning
NO_FLOCK_ERRNOS = frozenset({errno.ENOLCK, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP, errno.ENOTSUP})
log = logging.getLogger("csbench")


class ProjectLockError(RuntimeError):
    """Another driver works in this project (the message names it: kind, pid, command, since)."""


def _proc_stat(pid: int) -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name (field 3 first), None when gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2 :].split()


def process_start(pid: int) -> int | None:
    """When process ``pid`` started (clock ticks since boot), None when there is none."""
    fields = _proc_stat(pid)
    return int(fields[19]) if fields and len(fields) > 19 else None


def process_parent(pid: int) -> int | None:
    fields = _proc_stat(pid)
    return int(fields[1]) if fields and len(fields) > 1 else None


def process_argv(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode("utf-8", "replace") for part in raw.split(b"\0") if part]


def _short(command: str) -> str:
    """A command line on one line (a ``-c`` program's line breaks become spaces), cut to length."""
    command = " ".join(command.split())
    return command if len(command) <= COMMAND_CHARS else command[: COMMAND_CHARS - 3] + "..."


def _command_of(argv: list[str]) -> str:
    """A command line as a user typed it: ``snakemake --cores 2``, not ``/venv/bin/python3 /venv/bin/snakemake ...``."""
    if len(argv) >= 2 and Path(argv[0]).name.startswith("python") and not argv[1].startswith("-"):
        argv = argv[1:]  # a console script run by its interpreter
    if argv:
        argv = [Path(argv[0]).name, *argv[1:]]
    return _short(shlex.join(argv)) if argv else "?"


@dataclass(frozen=True)
class Driver:
    """The process a session is named after, and what a refusal says about it."""

    kind: str  # snakemake | dvc | pull | repro | csbench
    pid: int
    start: int | None
    host: str
    command: str = "?"

    @property
    def session(self) -> str:
        return f"{self.kind}:{self.host}:{self.pid}:{self.start if self.start is not None else '?'}"

    @classmethod
    def of_process(cls, kind: str, pid: int) -> Driver:
        return cls(kind, pid, process_start(pid), socket.gethostname(), _command_of(process_argv(pid)))

    @classmethod
    def from_session(cls, session: str) -> Driver | None:
        """The driver a ``CSBENCH_SESSION`` value names (None when it is not one)."""
        parts = session.split(":")
        if len(parts) != 4 or not parts[2].isdigit():
            return None
        kind, host, pid, start = parts
        command = _command_of(process_argv(int(pid))) if host == socket.gethostname() else "?"
        return cls(kind, int(pid), int(start) if start.isdigit() else None, host, command)

    def alive(self) -> bool | None:
        """Whether the driver process still runs (None: it runs on another host, cannot tell)."""
        if self.host != socket.gethostname():
            return None
        return self.start is not None and process_start(self.pid) == self.start


def _dvc_ancestor() -> int | None:
    """The ``dvc`` process this one runs under (a stage command's shell may sit between)."""
    pid = os.getppid()
    for _ in range(16):
        if pid is None or pid <= 1:
            return None
        argv = process_argv(pid)
        names = [Path(a).name for a in argv[:3]]
        if names and (names[0] == "dvc" or (names[0].startswith("python") and "dvc" in names[1:])):
            return pid
        pid = process_parent(pid)
    return None


def this_driver(command: str | None = None) -> Driver:
    """The driver whose session this process belongs to (module docstring)."""
    session = os.environ.get(SESSION_ENV)
    if session:
        driver = Driver.from_session(session)
        if driver is not None:
            return driver
    if os.environ.get("DVC_STAGE"):
        dvc = _dvc_ancestor()
        if dvc is not None:
            return Driver.of_process("dvc", dvc)
    me = Driver.of_process("csbench", os.getpid())
    return me if command is None else Driver(me.kind, me.pid, me.start, me.host, _short(command))


def _since(seconds: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime(seconds))


def _write_record(fd: int, driver: Driver) -> None:
    record = {
        "session": driver.session,
        "kind": driver.kind,
        "pid": driver.pid,
        "host": driver.host,
        "command": driver.command,
        "since": _since(time.time()),
    }
    data = (json.dumps(record) + "\n").encode()
    os.ftruncate(fd, 0)
    os.pwrite(fd, data, 0)


def read_record(fd_or_path: int | str | os.PathLike[str]) -> dict[str, Any]:
    """The record of the session that holds (or last held) the lock; {} when none was written."""
    try:
        data = os.pread(fd_or_path, 1 << 16, 0) if isinstance(fd_or_path, int) else Path(fd_or_path).read_bytes()
        record = json.loads(data.decode("utf-8"))
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


def _holders(path: Path) -> list[int]:
    """The processes with ``path`` open (the lock's holders), found through ``/proc/*/fd``."""
    try:
        target = path.stat()
    except OSError:
        return []
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            for fd in (proc / "fd").iterdir():
                try:
                    st = fd.stat()
                except OSError:
                    continue
                if (st.st_dev, st.st_ino) == (target.st_dev, target.st_ino):
                    found.append(int(proc.name))
                    break
        except OSError:
            continue
    return sorted(found)


def refusal(record: dict[str, Any], path: Path, what: str) -> str:
    """One line: who holds the project, and what to do."""
    if not record:
        return (
            f"{path} is held by another process (no record of it yet): another driver is starting in "
            f"this project; {what} was not started"
        )
    who = (
        f"{record.get('kind', '?')} (pid {record.get('pid', '?')}, `{record.get('command', '?')}`, "
        f"since {record.get('since', '?')})"
    )
    driver = Driver.from_session(str(record.get("session", "")))
    if driver is not None and driver.alive() is False:
        jobs = [f"pid {pid} (`{_command_of(process_argv(pid))}`)" for pid in _holders(path)]
        still = f": {', '.join(jobs)}" if jobs else ""
        return (
            f"{path}: {who} has exited, but processes it started still hold the project{still}; "
            f"{what} was not started: wait for them to finish or stop them"
        )
    return (
        f"{path}: {who} is working in this project; {what} was not started (two drivers would "
        "replace each other's files): wait for it to finish or stop it"
    )


def _spawn_keeper(fd: int, driver: Driver) -> None:
    """A small process that holds the lock (shares ``fd``'s lock) until ``driver``'s process exits."""
    code = (
        "import os,select,sys\n"
        "fd,pid,start=int(sys.argv[1]),int(sys.argv[2]),sys.argv[3]\n"
        "try:\n p=os.pidfd_open(pid)\nexcept OSError:\n sys.exit(0)\n"
        "try:\n s=open(f'/proc/{pid}/stat').read()\nexcept OSError:\n sys.exit(0)\n"
        "if s[s.rindex(')')+2:].split()[19]!=start:\n sys.exit(0)\n"
        "select.select([p],[],[])\n"
    )
    subprocess.Popen(
        [sys.executable, "-I", "-c", code, str(fd), str(driver.pid), str(driver.start)],
        pass_fds=(fd,),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


@dataclass
class ProjectLock:
    """This process's share of the project lock (released by :meth:`release` or at exit)."""

    path: Path
    fd: int | None
    driver: Driver
    started: bool  # this process started the session (wrote the record)

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)  # never LOCK_UN: a keeper may share this lock
            self.fd = None

    def __enter__(self) -> ProjectLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def acquire(
    driver: Driver | None = None, root: str | os.PathLike[str] = ".", what: str = "this command"
) -> ProjectLock:
    """Join ``driver``'s session (default :func:`this_driver`) in the project at ``root``, starting it
    when nobody holds the lock; raise :class:`ProjectLockError` when another session holds it.

    A session started here for a driver that is another process (``dvc``, a shell script) leaves a
    keeper process holding the lock until that process exits."""
    driver = driver or this_driver()
    path = (Path(root) / LOCK_FILE).absolute()
    try:
        return _acquire(driver, path, what)
    except OSError as err:
        if isinstance(err, BlockingIOError) or err.errno not in NO_FLOCK_ERRNOS:
            raise
        log.warning("%s: this file system has no flock (%s): the project lock is off", path, os.strerror(err.errno))
        return ProjectLock(path, None, driver, started=False)


def _flock(fd: int, operation: int) -> bool:
    """``flock`` without waiting: False when another holds it; any other error closes ``fd``."""
    try:
        fcntl.flock(fd, operation | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    except OSError:
        os.close(fd)
        raise
    return True


def _acquire(driver: Driver, path: Path, what: str) -> ProjectLock:
    deadline = time.monotonic() + SETTLE_S
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
        if _flock(fd, fcntl.LOCK_EX):  # nobody holds it: this session starts (or restarts after its keeper)
            _write_record(fd, driver)
            if not _flock(fd, fcntl.LOCK_SH):  # not atomic: another may win in between
                os.close(fd)
                continue
            if driver.pid != os.getpid() and driver.alive():
                _spawn_keeper(fd, driver)
            return ProjectLock(path, fd, driver, started=True)
        if not _flock(fd, fcntl.LOCK_SH):  # a session is starting (exclusive for a moment): look again shortly
            os.close(fd)
            if time.monotonic() > deadline:
                raise ProjectLockError(refusal(read_record(path), path, what))
            time.sleep(0.05)
            continue
        record = read_record(fd)
        if record.get("session") == driver.session:
            return ProjectLock(path, fd, driver, started=False)
        os.close(fd)
        holder = Driver.from_session(str(record.get("session", "")))
        if holder is not None and holder.alive() is False and time.monotonic() < deadline:
            time.sleep(0.05)  # its last members may be exiting, or a new session writing its record
            continue
        raise ProjectLockError(refusal(record, path, what))


def hold_dvc_repo_lock(root: str | os.PathLike[str] = ".", driver: Driver | None = None) -> int | None:
    """Hold DVC's repository lock (``.dvc/tmp/lock``, an flock as DVC takes it) for the life of this
    process, so a plain ``dvc repro`` is refused by DVC before it removes or restores any output.
    Returns the descriptor (None without a ``.dvc`` folder); raises :class:`ProjectLockError` naming
    the ``dvc`` process that holds it (DVC writes its pid into the file). DVC's own commands
    (``dvc status`` too) wait up to 3 s for it and then stop with DVC's lock message."""
    dvc_dir = Path(root) / ".dvc"
    if not dvc_dir.is_dir():
        return None
    path = (Path(root) / DVC_LOCK).absolute()
    path.parent.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + 3.0  # as long as DVC waits for it: a short `dvc status` may hold it
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as err:
            if not isinstance(err, BlockingIOError):
                os.close(fd)
                if err.errno in NO_FLOCK_ERRNOS:
                    return None  # no flock here: DVC cannot lock this way either (core.hardlink_lock)
                raise
            text = os.pread(fd, 256, 0).decode("utf-8", "replace").split()
            os.close(fd)
            if time.monotonic() < deadline:
                time.sleep(0.1)
                continue
            pid = int(text[0]) if text and text[0].isdigit() else None
            command = _command_of(process_argv(pid)) if pid else "?"
            started = process_start(pid) if pid else None
            since = ""
            if started is not None:
                since = f", since {_since(time.time() - _uptime() + started / os.sysconf('SC_CLK_TCK'))}"
            raise ProjectLockError(
                f"{path}: dvc (pid {pid if pid else '?'}, `{command}`{since}) is working in this project; "
                "snakemake was not started (two drivers would replace each other's files): wait for it to "
                "finish or stop it"
            ) from None
        me = driver or Driver.of_process("snakemake", os.getpid())
        os.ftruncate(fd, 0)
        os.pwrite(fd, f" {os.getpid()}\n# held by {me.kind} for csbench ({LOCK_FILE})\n".encode(), 0)
        return fd


def _uptime() -> float:
    try:
        return float(Path("/proc/uptime").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 0.0


# ------------------------------------------------------------------------------------------------
# snakemake: the main process holds the lock while it runs jobs (workflow/rules/common.smk)

# snakemake options that run no job and change no file: they take no lock (several dry runs of
# different studies may plan side by side, tests/e2e/test_studies.py)
_NO_JOB_OPTIONS = (
    "dryrun",
    "lint",
    "unlock",
    "list_rules",
    "list_target_rules",
    "list_changes",
    "list_input_changes",
    "list_params_changes",
    "list_code_changes",
    "list_untracked",
    "summary",
    "detailed_summary",
    "dag",
    "rulegraph",
    "filegraph",
    "d3dag",
    "print_compilation",
    "containerize",
    "archive",
    "cleanup_metadata",
    "cleanup_shadow",
    "version",
)


def snakemake_runs_jobs(argv: list[str] | None = None) -> bool:
    """Whether this snakemake call may run jobs or change files (a run, ``--touch``, a deletion):
    read from its command line with snakemake's own parser; True when it cannot be told."""
    argv = sys.argv[1:] if argv is None else argv
    try:
        from snakemake.cli import get_argument_parser

        parsed, _ = get_argument_parser().parse_known_args(argv)
    except (SystemExit, Exception):  # whatever it is, this call cannot be told: lock, to be safe
        return True
    if getattr(parsed, "report", None) and not getattr(parsed, "report_after_run", False):
        return False  # a report of what is there
    return not any(getattr(parsed, name, None) for name in _NO_JOB_OPTIONS)


@dataclass
class SnakemakeHold:
    """What the snakemake main process holds for its lifetime."""

    lock: ProjectLock
    dvc_fd: int | None


def hold_for_snakemake(remote_or_subprocess: bool, argv: list[str] | None = None) -> SnakemakeHold | None:
    """The lock for a snakemake main process that runs jobs (None for a dry run, ``--lint`` etc. and
    for snakemake's own job processes): the session of an enclosing driver (``make pull``) when one
    set ``CSBENCH_SESSION``, else a session of its own, exported to the jobs; with it DVC's
    repository lock. Raises :class:`ProjectLockError` when another driver works here."""
    if remote_or_subprocess or not snakemake_runs_jobs(argv):
        return None
    enclosing = Driver.from_session(os.environ.get(SESSION_ENV, "")) if os.environ.get(SESSION_ENV) else None
    driver = enclosing or Driver.of_process("snakemake", os.getpid())
    lock = acquire(driver, what="snakemake")
    dvc_fd = None
    if enclosing is None:  # inside `make pull` / `make repro` the enclosing driver runs dvc itself
        try:
            dvc_fd = hold_dvc_repo_lock(driver=driver)
        except ProjectLockError:
            lock.release()
            raise
    os.environ[SESSION_ENV] = driver.session  # jobs inherit it: they join this session
    return SnakemakeHold(lock, dvc_fd)


# ------------------------------------------------------------------------------------------------
# the command line: shell scripts and make hold the lock through these


def _cmd_status(_args: argparse.Namespace) -> int:
    path = Path(LOCK_FILE)
    if not path.exists():
        print("free (no driver has run here)")
        return 0
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        print(refusal(read_record(path), path, "nothing"))
        return 1
    finally:
        os.close(fd)
    print("free")
    return 0


def _cmd_hold(args: argparse.Namespace) -> int:
    """Hold the lock for process ``--pid`` (a keeper waits for it to exit); print the session."""
    driver = Driver.of_process(args.kind, args.pid)
    if driver.start is None:
        print(f"csbench lock: no process {args.pid}", file=sys.stderr)
        return 2
    try:
        with acquire(driver, what=args.what or args.kind):
            pass  # the keeper holds it now (or the session was already this one's)
    except ProjectLockError as err:
        print(f"csbench: error: {err}", file=sys.stderr)
        return 1
    print(driver.session)
    return 0


def _cmd_run(args: argparse.Namespace) -> int:
    """Run a command as a driver session of its own (this process holds the lock while it runs)."""
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        print("csbench lock run: no command", file=sys.stderr)
        return 2
    enclosing = os.environ.get(SESSION_ENV)
    driver = Driver.from_session(enclosing) if enclosing else None
    if driver is None:
        me = os.getpid()
        driver = Driver(args.kind, me, process_start(me), socket.gethostname(), _short(shlex.join(command)))
    try:
        lock = acquire(driver, what=shlex.join(command))
    except ProjectLockError as err:
        print(f"csbench: error: {err}", file=sys.stderr)
        return 1
    with lock:
        env = {**os.environ, SESSION_ENV: driver.session}
        try:
            return subprocess.call(command, env=env)
        except KeyboardInterrupt:
            return 130
        except OSError as err:
            print(f"csbench lock run: {command[0]}: {os.strerror(err.errno or errno.ENOENT)}", file=sys.stderr)
            return 127


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m csbench.lock", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command_name", required=True)
    p = sub.add_parser("status", help="who holds the project lock")
    p.set_defaults(func=_cmd_status)
    p = sub.add_parser("hold", help="hold the lock until process --pid exits; print the session to export")
    p.add_argument("--kind", required=True, help="what the driver is called in messages (pull, repro)")
    p.add_argument("--pid", type=int, required=True)
    p.add_argument("--what", help="what a refusal says was not started")
    p.set_defaults(func=_cmd_hold)
    p = sub.add_parser("run", help="run COMMAND as a driver holding the lock")
    p.add_argument("--kind", required=True)
    p.add_argument("command", nargs=argparse.REMAINDER)
    p.set_defaults(func=_cmd_run)
    args = parser.parse_args(argv)
    return args.func(args)


@contextlib.contextmanager
def held(what: str, root: str | os.PathLike[str] = ".") -> Iterator[ProjectLock]:
    """The lock of this process's session for the duration of a csbench phase command."""
    lock = acquire(this_driver(), root=root, what=what)
    try:
        yield lock
    finally:
        lock.release()


if __name__ == "__main__":
    sys.exit(main())
