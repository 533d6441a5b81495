"""Reading and writing runs, cells and device peaks.

The database path comes from, in order: the ``--db`` option, ``STACKWARS_DB``,
``./stackwars.db``. Every cell is written in its own transaction the moment its worker
returns, so an interrupted run loses only the cell in flight and ``--resume`` measures
what its plan still lacks.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import sqlite3
import stat
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from stackwars import canary
from stackwars import outputs
from stackwars.outputs import try_write_in
from stackwars.errors import SpecError, StackwarsError
from stackwars.records import CellSpec, Env, Measurement, MeasureConfig, _json_default
from stackwars.store import db

DEFAULT_DB = "stackwars.db"
# runs whose results are measured cells (a sensitivity study's knob runs: its cells, one run a knob)
CELL_KINDS = ("cells", "study:control-flow", "sensitivity-cells")


def db_path(option: str | os.PathLike | None = None) -> Path:
    return Path(option or os.environ.get("STACKWARS_DB") or DEFAULT_DB)


def _where(option: str | os.PathLike | None, flag: str = "--db") -> str:
    return flag if option is not None else ("STACKWARS_DB" if os.environ.get("STACKWARS_DB") else
                                            "the default database")


def check_db(option: str | os.PathLike | None = None, create: bool = True, flag: str = "--db") -> Path:
    """Before any work: the results database path is usable. An existing file must be a
    regular file and a stackwars database (readable, not corrupt, not another
    application's), and, for a command that writes (``create``), writable; a new one must be
    creatable where it is asked for. ``flag`` names the option in messages. Writes nothing."""
    if option is not None and not str(option).strip():
        raise SpecError(f"{flag} is empty; give a database file name")
    path = db_path(option)
    outputs.check_name(path, _where(option, flag))
    what = f"{_where(option, flag)} {path}"
    if path.exists():
        why = not_a_database_file(path)
        if why:
            raise SpecError(f"{what} {why}; give a database file name")
        try:
            conn = open_read_only(path)
            try:
                tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
                foreign = db.foreign_tables(conn)
                current = db.version(conn)
                broken = db.damage(conn)
            finally:
                conn.close()
        except sqlite3.DatabaseError as exc:
            raise SpecError(f"{what} is not a usable results database ({exc}); give another {flag}") from None
        if foreign:
            raise SpecError(f"{what} is an SQLite file of another application (tables: "
                            f"{', '.join(sorted(foreign)[:5])}); give another {flag}")
        if not create and "runs" not in tables:
            raise SpecError(f"{what} holds no stackwars results (an empty file); point {flag} / STACKWARS_DB at a "
                            f"database `stackwars run` wrote")
        if broken:
            raise SpecError(f"{what} is damaged: {broken}; nothing was changed in it: give another {flag}, or "
                            f"restore it from a copy")
        if current > db.LATEST:
            raise SpecError(f"{what} has schema version {current}, newer than this stackwars understands "
                            f"({db.LATEST}); upgrade stackwars to use it")
        if create:
            _check_writable(path, what)
        return path
    if not create:
        raise SpecError(f"no results database at {path}; run `stackwars run ...` first, or point {flag} / "
                        f"STACKWARS_DB at an existing one")
    parent = path.expanduser().resolve().parent
    if not parent.is_dir():
        raise SpecError(f"{what}: directory {parent} does not exist")
    try_write_in(parent, what, "create a database")
    return path


def not_a_database_file(path: Path) -> str | None:
    """Why an existing path cannot hold a database, or None: a directory, a device, a FIFO or a
    socket (opening it may block or destroy it), or a pseudo-file of /proc or /sys (it reports no
    size but reads text). Checked before any database is opened (check_db, Store)."""
    mode = os.stat(path).st_mode
    if stat.S_ISDIR(mode):
        return "is a directory"
    if not stat.S_ISREG(mode):
        kind = "a FIFO" if stat.S_ISFIFO(mode) else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else \
            "a socket" if stat.S_ISSOCK(mode) else "not a regular file"
        return f"is not a regular file (it is {kind}: a device or a FIFO cannot hold a database)"
    if os.stat(path).st_size == 0:
        try:
            with open(path, "rb") as f:
                # its size asked again after the read: a database another process is creating was empty at
                # the stat above and had its first page when read (16 processes opening one new database at
                # once: one refused as a pseudo-file, a suite run on 2026-12-02); a file whose bytes were read
                # reports them, a pseudo-file still none
                if f.read(1) and os.fstat(f.fileno()).st_size == 0:
                    return "is a pseudo-file (it reports no size but reads text, as /proc's and /sys's do)"
        except OSError as exc:
            return f"cannot be read ({exc.strerror or exc})"
    return None


def open_read_only(path: Path) -> sqlite3.Connection:
    """A read-only connection; where SQLite cannot make its lock and journal files (a read-only
    directory or filesystem) the file is read as it is (``immutable``: nobody else may be
    writing it there either)."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30, isolation_level=None)
    try:
        conn.execute("SELECT name FROM sqlite_master LIMIT 1").fetchall()
        return conn
    except sqlite3.OperationalError as exc:
        conn.close()
        if db._busy(exc) or not any(s in str(exc).lower() for s in ("unable to open", "readonly", "read-only")):
            raise
    return sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True, isolation_level=None)


def _check_writable(path: Path, what: str) -> None:
    """A write transaction opened and rolled back: a read-only file, directory or filesystem
    is refused now, not after the measuring. (A lock held by another process is not an
    error: the writes wait for it, and say so.)"""
    try:
        conn = sqlite3.connect(str(path), timeout=0.1, isolation_level=None)
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:  # a page actually written, then undone: a read-only file is only found out by writing
                conn.execute("CREATE TABLE stackwars_write_check (x)")
            finally:
                conn.execute("ROLLBACK")
        finally:
            conn.close()
    except sqlite3.OperationalError as exc:
        if db._busy(exc):
            return
        why = str(exc)
        with contextlib.suppress(OSError):
            if os.statvfs(path).f_flag & os.ST_RDONLY:
                why = f"{why}: it is on a read-only filesystem"
        raise SpecError(f"{what} cannot be written ({why}); nothing was run. Give a writable database") from None


class MalformedRecord(SpecError):
    """A stored record that cannot be read (hand-edited, cut short, another tool's row)."""


# what readers of this process skipped, in order, each named once (the CLI prints them at the end)
SKIPPED: dict[str, None] = {}


def _skip(problem: str) -> None:
    SKIPPED.setdefault(problem, None)


def _loads(text: Any, what: str) -> Any:
    """JSON stored by us, or MalformedRecord naming ``what`` and what is wrong with it."""
    try:
        return json.loads(text)
    except (TypeError, ValueError) as exc:
        raise MalformedRecord(f"{what}: its JSON is malformed ({exc})") from None


def _measurement(text: Any, what: str) -> Measurement:
    m = _loads(text, what)
    try:
        return Measurement.from_dict(m)
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        raise MalformedRecord(f"{what}: not a cell record ({type(exc).__name__}: {exc})") from None


def _dumps(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, default=_json_default)


@dataclass(frozen=True)
class RunInfo:
    run_id: str
    created_at: str
    kind: str
    command: str | None
    config: dict[str, Any]
    plan_items: tuple[dict[str, Any], ...]  # as planned; cells runs: CellSpec dicts
    env: dict[str, Any]  # of the run's first session

    @property
    def plan(self) -> tuple[CellSpec, ...]:
        return tuple(CellSpec.from_dict(d) for d in self.plan_items)

    @property
    def measure_config(self) -> MeasureConfig:
        return MeasureConfig.from_dict(self.config.get("measure", {}))


DB_WAIT_ENV = "STACKWARS_DB_WAIT_S"
DEFAULT_DB_WAIT_S = 300.0  # how long a write waits for another process's lock before it gives up


FULL_BELOW_BYTES = 1 << 20  # free space under this where SQLite says "disk I/O error": the disk is full


def why_not(exc: BaseException, path: Path, waited_s: float = 0.0) -> str:
    """Why SQLite refused a write, in words: a read-only place, a full disk (SQLite says "disk I/O
    error" where a write was cut short, so the free space decides), a lock held too long."""
    text = str(exc).lower()
    if "readonly" in text or "read-only" in text:
        return "the database is read-only (its file or its directory cannot be written)"
    if "full" in text:
        return "the disk is full"
    if isinstance(exc, sqlite3.OperationalError) and db._busy(exc):
        return f"another process held its lock for more than {waited_s:.0f} s"
    if "disk i/o error" in text:
        with contextlib.suppress(OSError):
            free = shutil.disk_usage(Path(path).expanduser().resolve().parent).free
            if free < FULL_BELOW_BYTES:
                return f"the disk is full ({free // 1024} KiB free)"
    return f"{type(exc).__name__}: {exc}"


@contextlib.contextmanager
def new_database(path: str | os.PathLike):
    """Around a command that may create the database at ``path``: where it fails, a database
    it created and stored no run in is removed with SQLite's side files, so a failure leaves
    nothing behind (a full disk, a refused merge)."""
    path = Path(path)
    existed = path.exists() or path.is_symlink()
    try:
        yield
    except BaseException:
        if not existed:
            remove_if_empty(path)
        raise


def remove_if_empty(path: Path) -> None:
    """Remove the database at ``path`` and its -wal, -shm and -journal if it holds no run."""
    if not path.exists():
        return
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            held = conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0] + \
                conn.execute("SELECT COUNT(*) FROM peaks").fetchone()[0]
        finally:
            conn.close()
    except sqlite3.DatabaseError:
        held = 0  # no schema yet, or unreadable: made by this command and holding nothing of anyone's
    if held or _open_elsewhere(path):  # another process just made it too, and is about to store its run
        return
    for suffix in ("", "-wal", "-shm", "-journal"):
        with contextlib.suppress(OSError):
            os.unlink(f"{path}{suffix}")


def _open_elsewhere(path: Path) -> bool:
    """Whether a process other than this one has the database open (Linux: its /proc fds)."""
    target = os.path.realpath(path)
    me = os.getpid()
    for pid in filter(str.isdigit, os.listdir("/proc") if os.path.isdir("/proc") else ()):
        if int(pid) == me:
            continue
        with contextlib.suppress(OSError):
            for fd in os.listdir(f"/proc/{pid}/fd"):
                with contextlib.suppress(OSError):
                    if os.readlink(f"/proc/{pid}/fd/{fd}") == target:
                        return True
    return False


class StoreWriteError(StackwarsError):
    """A write the database refused (locked too long, read-only, full): after work was done,
    so exit status 1; the caller keeps what it could not store (``keep_pending``)."""

    exit_code = 1

    def __init__(self, path: Path, what: str, exc: BaseException, waited_s: float = 0.0):
        reason = why_not(exc, path, waited_s)
        self.reason = reason
        super().__init__(f"could not store {what} in {path}: {reason}")


def _wait_s() -> float:
    from stackwars.parse import env_number

    value = env_number(DB_WAIT_ENV)
    return DEFAULT_DB_WAIT_S if value is None else value


def _lost_record(record_json: str) -> bool:
    """A record of a worker lost under an executor (``settings.lost``); a malformed one is not."""
    try:
        return bool((json.loads(record_json).get("settings") or {}).get("lost"))
    except (ValueError, AttributeError):
        return False


class Store:
    def __init__(self, path: str | os.PathLike | None = None, create: bool = True,
                 on_wait: Callable[[str], None] | None = None):
        """``on_wait``: told (once per write) when another process's lock makes a write wait."""
        self.path = db_path(path)
        self.on_wait = on_wait
        self.wait_s = _wait_s()
        # each stored record read once a Store: cells are append-only, and a run's looks read its rows again
        # and again (a verdict's next look, a calibration's thousands); the flat row of each too (``row_of``)
        self._parsed: dict[int, Measurement] = {}
        self._flat: dict[int, tuple[Measurement, dict[str, Any]]] = {}
        # the session (one start or resume of its run) each record read was measured in (``session_of``)
        self._sessions: dict[int, tuple[Measurement, int | None]] = {}
        if not create and not self.path.exists():
            raise SpecError(f"no results database at {self.path}; run `stackwars run ...` first, "
                            f"or point --db / STACKWARS_DB at an existing one")
        why = not_a_database_file(self.path) if self.path.exists() else None
        if why:
            raise SpecError(f"results database {self.path} {why}; give a database file name")
        try:
            with new_database(self.path):  # one that could not be created leaves nothing behind
                self.conn = db.connect(self.path, timeout=1.0)  # waits on locks are ours (_write): told, bounded
        except sqlite3.DatabaseError as exc:
            if isinstance(exc, sqlite3.OperationalError) and db._busy(exc):
                raise
            if not create and any(s in str(exc).lower() for s in ("unable to open", "readonly", "read-only")):
                self.conn = open_read_only(self.path)  # a reader in a read-only place
                return
            why = why_not(exc, self.path)
            if why.startswith("the disk is full"):
                raise StackwarsError(f"{self.path} cannot be created or opened: {why}; nothing was run") from None
            raise StackwarsError(f"{self.path} is not a usable results database ({exc})") from None

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ---- writing -------------------------------------------------------------------------
    def create_run(self, plan: Iterable[Any], config: Mapping[str, Any], kind: str = "cells",
                   command: str | None = None) -> str:
        """``plan``: what the run intends to measure, items with ``key`` and ``to_dict()``."""
        run_id = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(2)
        plan = list(plan)

        def insert() -> None:
            self.conn.execute("INSERT INTO runs (run_id, created_at, kind, command, config_json) VALUES (?,?,?,?,?)",
                              (run_id, db.now(), kind, command, _dumps(config)))
            self.conn.executemany(
                "INSERT INTO run_plan (run_id, position, cell_key, spec_json) VALUES (?,?,?,?)",
                [(run_id, i, s.key, _dumps(s.to_dict())) for i, s in enumerate(plan)])

        self._write("the new run", insert)
        return run_id

    def extend_plan(self, run_id: str, plan: Iterable[Any]) -> None:
        """Append cells to a run's plan (more processes of cells it measured): the plan only
        grows, so --resume measures whatever of it is still missing."""
        plan = list(plan)

        def insert() -> None:
            start = self.conn.execute("SELECT COALESCE(MAX(position), -1) + 1 FROM run_plan WHERE run_id = ?",
                                      (run_id,)).fetchone()[0]
            self.conn.executemany(
                "INSERT INTO run_plan (run_id, position, cell_key, spec_json) VALUES (?,?,?,?)",
                [(run_id, start + i, s.key, _dumps(s.to_dict())) for i, s in enumerate(plan)])

        self._write("the run's extended plan", insert)

    def start_session(self, run_id: str, env: Mapping[str, Any]) -> int:
        cur = self._write("the session", lambda: self.conn.execute(
            "INSERT INTO sessions (run_id, started_at, env_json) VALUES (?,?,?)", (run_id, db.now(), _dumps(env))))
        return int(cur.lastrowid)

    def add_cell(self, run_id: str, session_id: int, m: Measurement) -> bool:
        """Store the cell; False (nothing written) where the run already holds a record of its
        key that counts (any but a lost worker's): no cell key is ever stored twice."""
        row = m.to_row()
        s = m.spec

        def insert() -> bool:
            for status, rec in self.conn.execute("SELECT status, record_json FROM cells WHERE run_id = ? AND "
                                                 "cell_key = ?", (run_id, s.key)):
                if not (status == "error" and _lost_record(rec)):
                    return False
            self.conn.execute(
            """INSERT INTO cells (run_id, session_id, cell_key, created_at, workload, preset, phase, backend,
               framework, device, dtype, status, first_call_s, second_call_s, steady_median_s, compile_s,
               peak_memory_bytes, parity_max_rel_err, record_json)
               VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)""",
            (run_id, session_id, s.key, db.now(), s.workload, s.preset, s.phase, s.backend, m.framework,
             s.device, s.dtype, m.status, row["first_call_s"], row["second_call_s"], row["steady_median_s"],
             row["compile_s"], row["peak_memory_bytes"], row["parity_max_rel_err"], m.to_json()))
            return True

        return self._write(f"cell {s.key}", insert)

    def _superseded(self, run_id: str | None = None) -> set[int]:
        """Cells whose worker was lost under an executor (a Ray worker killed, a SLURM job
        pre-empted: ``settings.lost``) and that a later record of the same cell replaces. The
        table is append-only, so the lost record stays as history; readers see the cell once."""
        q = ("SELECT id, run_id, cell_key, status, CASE WHEN status = 'error' THEN record_json END FROM cells"
             + (" WHERE run_id = ?" if run_id else ""))
        lost: dict[tuple[str, str], int] = {}
        out = set()
        for i, rid, key, status, rec in self.conn.execute(q + " ORDER BY id", (run_id,) if run_id else ()):
            if (rid, key) in lost:
                out.add(lost.pop((rid, key)))
            if status == "error" and _lost_record(rec):
                lost[(rid, key)] = i
        return out

    def _lost(self, run_id: str) -> set[int]:
        """The lost records of ``run_id`` that nothing has replaced yet."""
        rows_ = self.conn.execute("SELECT id, record_json FROM cells WHERE run_id = ? AND status = 'error'", (run_id,))
        lost = {i for i, rec in rows_ if _lost_record(rec)}
        return lost - self._superseded(run_id)

    def add_peak(self, device_key: str, dtype: str, matmul_precision: str, flops_per_s: float | None,
                 bytes_per_s: float | None, record: Mapping[str, Any], env: Mapping[str, Any]) -> int:
        cur = self._write("the device peak", lambda: self.conn.execute(
            """INSERT INTO peaks (created_at, device_key, dtype, matmul_precision, flops_per_s, bytes_per_s,
               record_json, env_json) VALUES (?,?,?,?,?,?,?,?)""",
            (db.now(), device_key, dtype, matmul_precision, flops_per_s, bytes_per_s, _dumps(record), _dumps(env))))
        return int(cur.lastrowid)

    def _write(self, what: str, fn: Callable[[], Any]) -> Any:
        """``fn`` inside one immediate transaction. While another process holds the lock the
        write waits (``on_wait`` is told once), up to ``STACKWARS_DB_WAIT_S`` seconds; a
        database that cannot take it (locked too long, read-only, full) raises
        ``StoreWriteError`` with the reason; nothing of the transaction is left behind."""
        start = time.monotonic()
        told = False
        while True:
            try:
                self.conn.execute("BEGIN IMMEDIATE")
                try:
                    result = fn()
                    self.conn.execute("COMMIT")
                    return result
                except BaseException:
                    with contextlib.suppress(sqlite3.Error):
                        self.conn.execute("ROLLBACK")
                    raise
            except sqlite3.OperationalError as exc:
                waited = time.monotonic() - start
                if db._busy(exc) and waited < self.wait_s:
                    if not told and self.on_wait is not None:
                        self.on_wait(f"{self.path} is locked by another process: waiting up to {self.wait_s:.0f} s "
                                     f"to store {what}")
                        told = True
                    time.sleep(0.25)
                    continue
                raise StoreWriteError(self.path, what, exc, waited) from None
            except sqlite3.DatabaseError as exc:
                raise StoreWriteError(self.path, what, exc) from None

    def merge(self, sources: Sequence[Path]) -> list[dict[str, int]]:
        """Every run, session, cell, study row and peak of the databases at ``sources`` that this
        one lacks, added in one transaction for all of them (all or nothing). A run already here
        gains only the sessions and cells it lacks (a cell is the same when its run, key, time
        and record are), so merging twice adds nothing and two machines' shares of one run come
        together without a duplicate. Refused before anything is written, naming the source, the
        run and what is wrong: a run id here or in another source whose stored run differs
        (another kind, command or configuration), and a source holding a record that cannot be
        read (``check_source``). Returns what each source added."""
        conns = [open_read_only(Path(s)) for s in sources]
        try:
            seen: dict[str, tuple] = {}
            for source, src in zip(sources, conns):
                for run_id, _, kind, command, config in check_source(src, source):
                    mine = self.conn.execute("SELECT kind, command, config_json FROM runs WHERE run_id = ?",
                                             (run_id,)).fetchone()
                    where = "this database"
                    if mine is None and run_id in seen:
                        mine, where = seen[run_id][:3], f"source {seen[run_id][3]}"
                    if mine is not None and tuple(mine) != (kind, command, config):
                        raise SpecError(f"run {run_id} is in {source} and in {where} but is not the same run "
                                        f"(kind, command or configuration differ); nothing was merged")
                    seen.setdefault(run_id, (kind, command, config, source))
            held = {n: {o: f"{self.path}, run {r}" for o, r in found.items()}  # one name, one model (issue 88)
                    for n, found in _origins(self.conn).items()}
            for source, src in zip(sources, conns):
                for name, theirs in _origins(src).items():
                    for origin, run_id in theirs.items():
                        for other, where in held.get(name, {}).items():
                            if other != origin:
                                raise SpecError(f"{_clash(name, origin, other, where)}; run {run_id} of {source} "
                                                f"holds it; nothing was merged")
                        held.setdefault(name, {}).setdefault(origin, f"source {source}, run {run_id}")
            # a run here that another process is measuring (run --resume holds its lock) gains nothing
            # from a merge meanwhile: both would store the cells it is measuring (store/lock.py)
            from stackwars.store.lock import RunLock

            held = []
            try:
                for run_id in seen:
                    if self.conn.execute("SELECT 1 FROM runs WHERE run_id = ?", (run_id,)).fetchone():
                        try:
                            held.append(RunLock(self.path, run_id).acquire())
                        except SpecError as exc:
                            raise SpecError(f"{exc}; nothing was merged") from None
                return self._write(f"the runs of {', '.join(map(str, sources))}",
                                   lambda: [self._merge_one(src) for src in conns])
            finally:
                for lock in held:
                    lock.release()
        finally:
            for src in conns:
                src.close()

    def _merge_one(self, src: sqlite3.Connection) -> dict[str, int]:
        """Inside ``merge``'s transaction: what ``src`` adds."""
        tables = {r[0] for r in src.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        src_runs = src.execute("SELECT run_id, created_at, kind, command, config_json FROM runs").fetchall()
        added = dict.fromkeys(("runs", "sessions", "cells", "study_rows", "peaks", "cells_kept_apart"), 0)
        c = self.conn
        for run in src_runs:
            run_id = run[0]
            if c.execute("SELECT 1 FROM runs WHERE run_id = ?", (run_id,)).fetchone() is None:
                c.execute("INSERT INTO runs (run_id, created_at, kind, command, config_json) VALUES "
                          "(?,?,?,?,?)", run)
                added["runs"] += 1
            for row in src.execute("SELECT position, cell_key, spec_json FROM run_plan WHERE run_id = ?",
                                   (run_id,)):
                c.execute("INSERT OR IGNORE INTO run_plan (run_id, position, cell_key, spec_json) "
                          "VALUES (?,?,?,?)", (run_id, *row))
            sessions = {}
            for sid, started, env_json in src.execute(
                    "SELECT session_id, started_at, env_json FROM sessions WHERE run_id = ?", (run_id,)):
                found = c.execute("SELECT session_id FROM sessions WHERE run_id = ? AND started_at = ? AND "
                                  "env_json = ?", (run_id, started, env_json)).fetchone()
                if found is None:
                    found = (c.execute("INSERT INTO sessions (run_id, started_at, env_json) VALUES (?,?,?)",
                                       (run_id, started, env_json)).lastrowid,)
                    added["sessions"] += 1
                sessions[sid] = found[0]
            for row in src.execute(
                    "SELECT session_id, cell_key, created_at, workload, preset, phase, backend, framework, "
                    "device, dtype, status, first_call_s, second_call_s, steady_median_s, compile_s, "
                    "peak_memory_bytes, parity_max_rel_err, record_json FROM cells WHERE run_id = ? "
                    "ORDER BY id", (run_id,)):
                if c.execute("SELECT 1 FROM cells WHERE run_id = ? AND cell_key = ? AND created_at = ? AND "
                             "record_json = ?", (run_id, row[1], row[2], row[-1])).fetchone():
                    continue
                # the same key measured otherwise in another copy of the run (two copies resumed apart): one
                # key, one record in the run, so the other is kept apart, as a merge conflict the verdict never
                # reads (``merge_conflicts``), and counted, never both in one verdict
                held = [rec for status, rec in c.execute(
                    "SELECT status, record_json FROM cells WHERE run_id = ? AND cell_key = ?", (run_id, row[1]))
                    if not (status == "error" and _lost_record(rec))]
                if held and not (row[10] == "error" and _lost_record(row[-1])):
                    kept = json.dumps({"cell_key": row[1], "status": row[10], "record": json.loads(row[-1])})
                    if not c.execute("SELECT 1 FROM study_rows WHERE run_id = ? AND study = ? AND item_key = ? AND "
                                     "created_at = ? AND row_json = ?",
                                     (run_id, MERGE_CONFLICT, row[1], row[2], kept)).fetchone():
                        c.execute("INSERT INTO study_rows (run_id, session_id, study, item_key, created_at, row_json) "
                                  "VALUES (?,?,?,?,?,?)", (run_id, sessions[row[0]], MERGE_CONFLICT, row[1], row[2],
                                                           kept))
                        added["cells_kept_apart"] += 1
                    continue
                c.execute("INSERT INTO cells (run_id, session_id, cell_key, created_at, workload, preset, "
                          "phase, backend, framework, device, dtype, status, first_call_s, second_call_s, "
                          "steady_median_s, compile_s, peak_memory_bytes, parity_max_rel_err, record_json) "
                          "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                          (run_id, sessions[row[0]], *row[1:]))
                added["cells"] += 1
            for sid, study, item, created, row_json in (src.execute(
                    "SELECT session_id, study, item_key, created_at, row_json FROM study_rows WHERE run_id = ? "
                    "ORDER BY id", (run_id,)) if "study_rows" in tables else ()):
                if c.execute("SELECT 1 FROM study_rows WHERE run_id = ? AND item_key = ? AND created_at = ? "
                             "AND row_json = ?", (run_id, item, created, row_json)).fetchone():
                    continue
                c.execute("INSERT INTO study_rows (run_id, session_id, study, item_key, created_at, row_json) "
                          "VALUES (?,?,?,?,?,?)", (run_id, sessions[sid], study, item, created, row_json))
                added["study_rows"] += 1
        for row in src.execute("SELECT created_at, device_key, dtype, matmul_precision, flops_per_s, "
                               "bytes_per_s, record_json, env_json FROM peaks ORDER BY id"):
            if c.execute("SELECT 1 FROM peaks WHERE created_at = ? AND device_key = ? AND dtype = ? AND "
                         "matmul_precision = ? AND record_json = ?",
                         (row[0], row[1], row[2], row[3], row[6])).fetchone():
                continue
            c.execute("INSERT INTO peaks (created_at, device_key, dtype, matmul_precision, flops_per_s, "
                      "bytes_per_s, record_json, env_json) VALUES (?,?,?,?,?,?,?,?)", row)
            added["peaks"] += 1
        return added

    # ---- reading -------------------------------------------------------------------------
    def run_ids(self, kind: str | None = None) -> list[str]:
        q = "SELECT run_id FROM runs" + (" WHERE kind = ?" if kind else "") + " ORDER BY created_at, run_id"
        return [r[0] for r in self.conn.execute(q, (kind,) if kind else ())]

    def latest_run_id(self, kind: str | None = "cells") -> str | None:
        ids = self.run_ids(kind)
        return ids[-1] if ids else None

    def run(self, run_id: str) -> RunInfo:
        if not str(run_id).strip():
            raise SpecError(f"the run id is empty; give one (`stackwars runs --db {self.path}` lists them)")
        row = self.conn.execute("SELECT run_id, created_at, kind, command, config_json FROM runs WHERE run_id = ?",
                                (run_id,)).fetchone()
        if row is None:
            known = ", ".join(self.run_ids()[-5:]) or "none"
            raise SpecError(f"no run {run_id!r} in {self.path}; latest runs: {known}")
        what = f"run {run_id} in {self.path}"  # a run that cannot be read is refused, naming it
        plan = tuple(_loads(r[0], f"{what}, planned cell {r[1]}") for r in self.conn.execute(
            "SELECT spec_json, cell_key FROM run_plan WHERE run_id = ? ORDER BY position", (run_id,)))
        env_row = self.conn.execute("SELECT env_json FROM sessions WHERE run_id = ? ORDER BY session_id LIMIT 1",
                                    (run_id,)).fetchone()
        config = _loads(row[4], f"{what}, its configuration")
        env = _loads(env_row[0], f"{what}, its first session's environment") if env_row else {}
        if not isinstance(config, dict) or not isinstance(env, dict):
            raise MalformedRecord(f"{what}: its configuration or environment is not a JSON object")
        return RunInfo(row[0], row[1], row[2], row[3], config, plan, env)

    def cell_run(self, run_id: str, flag: str = "run") -> RunInfo:
        """A run of measured cells; a training or study run named where cells are expected is
        refused with what it is and where its rows are read."""
        info = self.run(run_id)
        if info.kind != "cells":
            raise SpecError(f"{flag} {run_id}: this is a {info.kind} run ({info.command or 'no command recorded'}), "
                            f"not a run of measured cells; `stackwars show {run_id}` prints its rows and "
                            f"`stackwars export --run {run_id}` exports them")
        return info

    def runs(self) -> list[dict[str, Any]]:
        """Every stored run with its size and outcome: what `stackwars runs` lists."""
        out = []
        for run_id, created, kind, command in self.conn.execute(
                "SELECT run_id, created_at, kind, command FROM runs ORDER BY created_at, run_id"):
            planned = self.conn.execute("SELECT COUNT(*) FROM run_plan WHERE run_id = ?", (run_id,)).fetchone()[0]
            if kind in CELL_KINDS:
                counts = dict(self.conn.execute("SELECT status, COUNT(*) FROM cells WHERE run_id = ? GROUP BY status",
                                                (run_id,)).fetchall())
                superseded = len(self._superseded(run_id))  # lost records a later one replaced
                if superseded:
                    counts["error"] -= superseded
                    counts = {k: v for k, v in counts.items() if v}
            else:
                counts = {}
                for (row,) in self.conn.execute("SELECT row_json FROM study_rows WHERE run_id = ?", (run_id,)):
                    try:
                        status = json.loads(row).get("status") or "ok"
                    except (ValueError, AttributeError):
                        status = "malformed"
                    counts[status] = counts.get(status, 0) + 1
            out.append({"run_id": run_id, "created_at": created, "kind": kind, "command": command,
                        "planned": planned, "done": sum(counts.values()), "statuses": counts})
        return out

    def workload_origins(self, run_id: str) -> dict[str, str]:
        """Where each workload of ``run_id``'s stored cells came from ("file PATH:NAME" for a model file)."""
        return {name: next(iter(found)) for name, found in _origins(self.conn, run_id).items()}

    def cells(self, run_id: str | None = None) -> list[tuple[str, Measurement]]:
        """The run's cells (every run's), each once; a record that cannot be read is skipped and
        named (``SKIPPED``), never a traceback for the command reading it."""
        q = "SELECT id, run_id, cell_key, record_json, session_id FROM cells"
        args: tuple = ()
        if run_id is not None:
            q += " WHERE run_id = ?"
            args = (run_id,)
        hidden = self._superseded(run_id)  # a lost cell measured again: the new record only
        out = []
        for i, rid, key, rec, session in self.conn.execute(q + " ORDER BY id", args):
            if i in hidden:
                continue
            if i in self._parsed:
                out.append((rid, self._parsed[i]))
                continue
            try:
                m = _measurement(rec, f"run {rid}, cell {key} (row {i} of {self.path})")
            except MalformedRecord as exc:
                _skip(f"{exc}; skipped")
                continue
            self._parsed[i] = m
            self._sessions[id(m)] = (m, session)
            out.append((rid, m))
        return out

    def session_of(self, m: Measurement) -> int | None:
        """The session (its run's start, or one of its resumes) a record read by ``cells`` was measured
        in: two processes of one run in different sessions were not measured one after the other, an
        interruption lies between them (verdict/decide.py: a round, an A/A pair)."""
        found = self._sessions.get(id(m))
        return found[1] if found is not None and found[0] is m else None

    def row_of(self, m: Measurement) -> dict[str, Any]:
        """``m.to_row()`` (its summary's bootstrap included), once for each record this Store read."""
        key = id(m)
        if key not in self._flat or self._flat[key][0] is not m:
            self._flat[key] = (m, m.to_row())
        return self._flat[key][1]

    def missing(self, run_id: str) -> list[CellSpec]:
        """The planned cells not stored yet, and those whose worker was lost (measured again;
        the new record replaces the lost one)."""
        lost = set(self._lost(run_id))
        done = {k for i, k in self.conn.execute("SELECT id, cell_key FROM cells WHERE run_id = ?", (run_id,))
                if i not in lost}
        return [s for s in self.run(run_id).plan if s.key not in done]

    def add_study_rows(self, run_id: str, session_id: int, study: str, item_key: str,
                       rows_: Iterable[Mapping[str, Any]]) -> None:
        """All rows of one study item (one training, one recompile sequence) in one transaction."""
        stamp = db.now()
        rows_ = list(rows_)
        self._write(f"the rows of {item_key}", lambda: self.conn.executemany(
            "INSERT INTO study_rows (run_id, session_id, study, item_key, created_at, row_json) VALUES (?,?,?,?,?,?)",
            [(run_id, session_id, study, item_key, stamp, _dumps(r)) for r in rows_]))

    def study_rows(self, run_id: str, study: str | None = None) -> list[dict[str, Any]]:
        q = "SELECT id, item_key, row_json FROM study_rows WHERE run_id = ?" + (" AND study = ?" if study else "")
        args = (run_id, study) if study else (run_id,)
        out = []
        for i, k, r in self.conn.execute(q + " ORDER BY id", args):
            try:
                row = _loads(r, f"run {run_id}, study row {k} (row {i} of {self.path})")
                if not isinstance(row, dict):
                    raise MalformedRecord(f"run {run_id}, study row {k} (row {i} of {self.path}): not a JSON object")
            except MalformedRecord as exc:
                _skip(f"{exc}; skipped")
                continue
            out.append({"item_key": k, **row})
        return out

    def latest_peak(self, device_key: str, dtype: str, matmul_precision: str) -> dict[str, Any] | None:
        row = self.conn.execute(
            """SELECT id, created_at, flops_per_s, bytes_per_s FROM peaks
               WHERE device_key = ? AND dtype = ? AND matmul_precision = ? ORDER BY id DESC LIMIT 1""",
            (device_key, dtype, matmul_precision)).fetchone()
        if row is None:
            return None
        return {"peaks_id": row[0], "measured_at": row[1], "flops_per_s": row[2], "bytes_per_s": row[3],
                "device_key": device_key}

    def peaks(self) -> list[dict[str, Any]]:
        cols = ("id", "created_at", "device_key", "dtype", "matmul_precision", "flops_per_s", "bytes_per_s")
        return [dict(zip(cols, r)) for r in self.conn.execute(f"SELECT {', '.join(cols)} FROM peaks ORDER BY id")]


def check_source(src: sqlite3.Connection, source: Path) -> list[tuple]:
    """A database to merge from, read whole before anything is written: every run's
    configuration, plan, sessions, cells, study rows and peaks must be readable, and every cell
    and study row must belong to a session of its run. The first record that is not is refused
    (MalformedRecord: the source, the run, the record, what is wrong). Returns its runs."""
    what = f"source {source}"
    runs = src.execute("SELECT run_id, created_at, kind, command, config_json FROM runs").fetchall()
    tables = {r[0] for r in src.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    sessions: dict[str, set[int]] = {}
    for run_id, *_rest, config in runs:
        _loads(config, f"{what}: run {run_id}'s configuration")
    for run_id, key, spec in src.execute("SELECT run_id, cell_key, spec_json FROM run_plan"):
        _loads(spec, f"{what}: run {run_id}, planned cell {key}")
    for sid, run_id, env in src.execute("SELECT session_id, run_id, env_json FROM sessions"):
        _loads(env, f"{what}: run {run_id}, session {sid}'s environment")
        sessions.setdefault(run_id, set()).add(sid)
    for i, run_id, sid, key, rec in src.execute("SELECT id, run_id, session_id, cell_key, record_json FROM cells"):
        where = f"{what}: run {run_id}, cell {key} (row {i})"
        if sid not in sessions.get(run_id, ()):
            raise MalformedRecord(f"{where}: its session {sid} is not in the source; nothing was merged")
        try:
            _measurement(rec, where)
        except MalformedRecord as exc:
            raise MalformedRecord(f"{exc}; nothing was merged") from None
    if "study_rows" in tables:
        for i, run_id, sid, key, row in src.execute("SELECT id, run_id, session_id, item_key, row_json "
                                                    "FROM study_rows"):
            where = f"{what}: run {run_id}, study row {key} (row {i})"
            if sid not in sessions.get(run_id, ()):
                raise MalformedRecord(f"{where}: its session {sid} is not in the source; nothing was merged")
            _loads(row, where)
    for i, rec, env in src.execute("SELECT id, record_json, env_json FROM peaks"):
        _loads(rec, f"{what}: device peak {i}")
        _loads(env, f"{what}: device peak {i}'s environment")
    return runs


# ---- cells the database could not take -----------------------------------------------------------
def pending_paths(db: Path, run_id: str) -> list[Path]:
    """Where a run keeps cells its database refused: beside the database, else (its directory
    not writable) in this user's own folder of the temporary directory (lock.private_dir), named
    after the database and the run; written as the tool's own file (lock.open_own)."""
    import hashlib

    from stackwars.store.lock import private_dir

    db = Path(db)
    digest = hashlib.sha256(str(db.resolve()).encode()).hexdigest()[:12]
    return [db.with_name(f"{db.name}.{run_id}.pending.jsonl"), private_dir() / f"{digest}-{run_id}.pending.jsonl"]


def keep_pending(db: Path, run_id: str, m: Measurement) -> Path | None:
    """Append the cell to the run's pending file (one JSON line, flushed to disk); the first
    place that takes it, or None if none did."""
    from stackwars.store.lock import open_own

    for path in pending_paths(db, run_id):
        try:
            with os.fdopen(open_own(path, append=True, what="the run's pending file"), "a") as f:
                f.write(m.to_json() + "\n")
                f.flush()
                os.fsync(f.fileno())
            return path
        except (OSError, SpecError):  # not writable there, or a file not the tool's own: the next place
            continue
    return None


def store_pending(store: "Store", run_id: str, session_id: int) -> int:
    """Cells an earlier session of this run could not store: added now (a cell already stored
    is not added twice) and their files removed. Returns how many were added."""
    stored = {r[0] for r in store.conn.execute("SELECT cell_key FROM cells WHERE run_id = ?", (run_id,))}
    added = 0
    for path in pending_paths(store.path, run_id):
        if not path.is_file():
            continue
        for line in path.read_text().splitlines():
            if not line.strip():
                continue
            try:
                m = Measurement.from_dict(json.loads(line))
            except (ValueError, KeyError, TypeError):  # a line cut short by a crash: that cell is measured again
                continue
            if m.spec.key not in stored:
                store.add_cell(run_id, session_id, m)
                stored.add(m.spec.key)
                added += 1
        path.unlink()
    return added


def study_rows(store: Store, run_id: str | None = None) -> list[dict[str, Any]]:
    """Rows of training and study runs (one per epoch, call, variant ...), with run_id and kind."""
    ids = [run_id] if run_id is not None else [r for r in store.run_ids() if store.run(r).kind != "cells"]
    out = []
    for rid in ids:
        kind = store.run(rid).kind
        out.extend({"run_id": rid, "kind": kind, **r} for r in store.study_rows(rid))
    return out


def cell_row(run_id: str, m: Measurement, info: RunInfo | Mapping[str, Any] | None = None,
             flat: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """One flat row: Measurement.to_row plus its run id and, given the run (``RunInfo``; an
    environment alone is read as the run's first session's), the machine it was measured on
    (every number carries it) and the design of its verdict: the looks the run allows and the
    margin of "same speed" it declared (verdict/sequential.py). Every
    reader of a run's cells (the verdict, the report, an export) builds its rows here, so
    that none reads them at another level. A backend stored under an old name is shown under
    its current one."""
    from stackwars.registry import canonical_backend

    row = {"run_id": run_id, **(flat if flat is not None else m.to_row())}  # flat: m.to_row(), read before
    row["backend"] = canonical_backend(row["backend"])
    env = info.env if isinstance(info, RunInfo) else info
    if env is not None:
        row["machine"] = Env(env).machine(((m.settings or {}).get("placement") or {}).get("kind"))
    if isinstance(info, RunInfo):
        cfg = info.measure_config
        if row.get("matmul_precision") is None:  # a cell that failed before it set one ran under its run's
            row["matmul_precision"] = cfg.matmul_precision
        # the looks of its verdict (verdict/sequential.schedule: --processes rounds, then every LOOK_STEP more, up
        # to --max-processes) and the margin of "same speed" the run declared
        row["processes_planned"] = cfg.processes
        row["max_processes"] = cfg.max_processes
        row["margin"] = cfg.margin
    return row


def rows(store: Store, run_id: str | None = None) -> list[dict[str, Any]]:
    """Flat rows for export and reports, each with its machine and its look."""
    runs: dict[str, RunInfo] = {}

    def run(rid: str) -> RunInfo:
        if rid not in runs:
            runs[rid] = store.run(rid)
        return runs[rid]

    screened: dict[str, dict[str, str]] = {}

    def row(rid: str, m: Measurement) -> dict[str, Any]:
        if rid not in screened:
            screened[rid] = screened_out(store, rid)
        return {**cell_row(rid, m, run(rid), store.row_of(m)),
                "screened_out": screened[rid].get(m.spec.key.split("#r")[0]), "session": store.session_of(m)}

    # each process judged against its run's canary (stackwars/canary.py): a slowed one decides nothing
    out = canary.judge(row(rid, m) for rid, m in store.cells(run_id))
    if run_id is None:  # every run of the database read together
        one_model_per_name(out, f"{store.path}")
    return out


def _origins(conn: sqlite3.Connection, run_id: str | None = None) -> dict[str, dict[str, str]]:
    """Each stored workload name -> {where it came from ("built-in", "file PATH:NAME"): a run holding it}."""
    out: dict[str, dict[str, str]] = {}
    for name, origin, run_id in conn.execute(
            "SELECT workload, json_extract(record_json, '$.settings.origin.workload'), MIN(run_id) FROM cells "
            "WHERE ? IS NULL OR run_id = ? GROUP BY 1, 2", (run_id, run_id)):
        if origin and origin != "unknown":
            out.setdefault(name, {})[origin] = run_id
    return out


def _clash(name: str, origin: str, other: str, where: str) -> SpecError:
    return SpecError(f"model {name!r} of {origin} has the name of another model in {where} ({other}): a model is "
                     f"its name and where it comes from, and a reader would set one's cells against the other's. "
                     f"Rename one (its stackwars.Model(name=...)), or keep them in two databases (--db)")


def check_one_model_per_name(store: Store, origins: Mapping[str, str]) -> None:
    """Refuse to write cells of ``origins`` (workload name -> origin) into ``store`` where it holds
    that name from another origin: two files that both register ``name="lm"``, measured into one
    database, would be one row to every reader (issue 88). Called before a run is created and
    before a merge writes (``Store.merge``)."""
    held = _origins(store.conn)
    for name, origin in origins.items():
        for other, run_id in held.get(name, {}).items():
            if origin and origin != "unknown" and other != origin:
                raise _clash(name, origin, other, f"{store.path}, run {run_id}")


def one_model_per_name(found: Iterable[Mapping[str, Any]], what: str = "the runs read together") -> None:
    """Refuse rows read together that hold one workload name from two origins (a database written
    before names were checked, two databases compared): kept apart by refusing, naming both."""
    seen: dict[str, tuple[str, str]] = {}
    for r in found:
        origin = r.get("workload_origin")
        if not origin or origin == "unknown":
            continue
        first = seen.setdefault(r["workload"], (origin, r.get("run_id", "?")))
        if first[0] != origin:
            raise _clash(r["workload"], origin, f"{first[0]}, run {first[1]}", what)


MERGE_CONFLICT = "merge-conflict"  # a cell key another copy of its run measured otherwise, kept apart (Store.merge)


def merge_conflicts(store: Store, run_id: str) -> list[dict[str, Any]]:
    """The cells of ``run_id`` a merge kept apart: each a key that a copy of the run had measured
    otherwise (``Store.merge``), with the record it brought."""
    return store.study_rows(run_id, MERGE_CONFLICT)


SCREENING = "screening"  # the study rows of a run's screening decisions (verdict/choose.screen)


def screening_rows(store: Store, run_id: str) -> list[dict[str, Any]]:
    """A run's screening decisions (orchestrate.Run._screen), each read with checks: a row without
    a cell (text), a keep (true or false) and a why (text) is named in a warning and skipped."""
    out = []
    for r in store.study_rows(run_id, SCREENING):
        if not (isinstance(r.get("cell"), str) and isinstance(r.get("keep"), bool) and isinstance(r.get("why"), str)):
            _skip(f"run {run_id}, a screening decision without a cell, a keep or a why ({str(r)[:120]}); skipped")
            continue
        out.append(r)
    return out


def screened_out(store: Store, run_id: str) -> dict[str, str]:
    """The cells a run's screening measured in no more processes, and why: cell id -> reason."""
    return {r["cell"]: r["why"] for r in screening_rows(store, run_id) if not r["keep"]}


def load_results(db_file: str | os.PathLike | None = None):
    """Every stored cell as a pandas DataFrame, one row per cell, raw samples included."""
    import pandas as pd

    with Store(db_file, create=False) as store:
        return pd.DataFrame(rows(store))
