"""SQLite schema, versioned, with forward migrations.

``schema_version`` holds one row per applied migration. Opening a database applies the
missing migrations in one immediate transaction (the version is read inside it), retried
while another process holds the lock, so any number of processes may create or upgrade
the same database at once: exactly one of them applies each migration. A database written
by a newer stackwars (a version this code does not know) is refused rather than misread;
a file that is not a stackwars database is refused with what it is.
Results tables are append-only: triggers reject UPDATE and DELETE.
"""

from __future__ import annotations

import re
import sqlite3
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, TypeVar

from stackwars.errors import StackwarsError


def _append_only(table: str) -> str:
    return (f"CREATE TRIGGER {table}_no_update BEFORE UPDATE ON {table} "
            f"BEGIN SELECT RAISE(ABORT, '{table} is append-only'); END;\n"
            f"CREATE TRIGGER {table}_no_delete BEFORE DELETE ON {table} "
            f"BEGIN SELECT RAISE(ABORT, '{table} is append-only'); END;\n")


MIGRATIONS: list[str] = [
    # 1: runs, their planned cells, sessions (each run/resume invocation), cells, device peaks
    """
    CREATE TABLE runs (
        run_id TEXT PRIMARY KEY,
        created_at TEXT NOT NULL,
        kind TEXT NOT NULL,
        command TEXT,
        config_json TEXT NOT NULL
    );
    CREATE TABLE run_plan (
        run_id TEXT NOT NULL REFERENCES runs(run_id),
        position INTEGER NOT NULL,
        cell_key TEXT NOT NULL,
        spec_json TEXT NOT NULL,
        PRIMARY KEY (run_id, cell_key)
    );
    CREATE TABLE sessions (
        session_id INTEGER PRIMARY KEY AUTOINCREMENT,
        run_id TEXT NOT NULL REFERENCES runs(run_id),
        started_at TEXT NOT NULL,
        env_json TEXT NOT NULL
    );
    CREATE TABLE cells (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        run_id TEXT NOT NULL REFERENCES runs(run_id),
        session_id INTEGER NOT NULL REFERENCES sessions(session_id),
        cell_key TEXT NOT NULL,
        created_at TEXT NOT NULL,
        workload TEXT NOT NULL, preset TEXT NOT NULL, phase TEXT NOT NULL, backend TEXT NOT NULL,
        framework TEXT, device TEXT NOT NULL, dtype TEXT NOT NULL, status TEXT NOT NULL,
        first_call_s REAL, second_call_s REAL, steady_median_s REAL, compile_s REAL,
        peak_memory_bytes INTEGER, parity_max_rel_err REAL,
        record_json TEXT NOT NULL
    );
    CREATE INDEX cells_by_run ON cells (run_id, cell_key);
    CREATE TABLE peaks (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        created_at TEXT NOT NULL,
        device_key TEXT NOT NULL, dtype TEXT NOT NULL, matmul_precision TEXT NOT NULL,
        flops_per_s REAL, bytes_per_s REAL,
        record_json TEXT NOT NULL,
        env_json TEXT NOT NULL
    );
    CREATE INDEX peaks_by_device ON peaks (device_key, dtype, matmul_precision);
    """ + "".join(_append_only(t) for t in ("runs", "run_plan", "sessions", "cells", "peaks")),
    # 2: rows of studies (training epochs, recompile calls, ...), one JSON object each
    """
    CREATE TABLE study_rows (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        run_id TEXT NOT NULL REFERENCES runs(run_id),
        session_id INTEGER NOT NULL REFERENCES sessions(session_id),
        study TEXT NOT NULL,
        item_key TEXT NOT NULL,
        created_at TEXT NOT NULL,
        row_json TEXT NOT NULL
    );
    CREATE INDEX study_rows_by_run ON study_rows (run_id, study, item_key);
    """ + _append_only("study_rows"),
]

LATEST = len(MIGRATIONS)


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def version(conn: sqlite3.Connection) -> int:
    has = conn.execute("SELECT name FROM sqlite_master WHERE type='table' AND name='schema_version'").fetchone()
    if not has:
        return 0
    row = conn.execute("SELECT MAX(version) FROM schema_version").fetchone()
    return int(row[0] or 0)


T = TypeVar("T")
BUSY_RETRY_S = 60.0


def _busy(exc: sqlite3.OperationalError) -> bool:
    text = str(exc).lower()
    return "locked" in text or "busy" in text


def retry_busy(fn: Callable[[], T], timeout_s: float = BUSY_RETRY_S) -> T:
    """Run ``fn``, retrying while SQLite reports the database locked or busy (some lock
    waits, such as switching to WAL, return at once instead of using the busy timeout)."""
    deadline = time.monotonic() + timeout_s
    delay = 0.005
    while True:
        try:
            return fn()
        except sqlite3.OperationalError as exc:
            if not _busy(exc) or time.monotonic() > deadline:
                raise
            time.sleep(delay)
            delay = min(delay * 2, 0.2)


def _tables_of(migrations: list[str]) -> set[str]:
    return {m.group(1) for script in migrations
            for m in re.finditer(r"CREATE TABLE (?:IF NOT EXISTS )?(\w+)", script, flags=re.I)}


def damage(conn: sqlite3.Connection) -> str | None:
    """What is wrong with a stackwars database's schema, or None: a version no stackwars wrote
    (below 0), or a table its version holds missing (dropped by hand). One check, for every
    command that opens a database, so that none meets it as a traceback half-way through."""
    names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if "schema_version" not in names:
        return None
    rows = conn.execute("SELECT version FROM schema_version").fetchall()
    bad = [v for (v,) in rows if not isinstance(v, int) or v < 1]
    if bad:
        return f"its schema_version table holds version {bad[0]!r}, which no stackwars writes"
    current = max((v for (v,) in rows), default=0)
    missing = sorted(_tables_of(MIGRATIONS[:min(current, LATEST)]) - names)
    if missing:
        return f"its schema (version {current}) lacks the table(s) {', '.join(missing)}"
    return None


def foreign_tables(conn: sqlite3.Connection) -> list[str]:
    """Tables of another application in a database without stackwars' schema_version."""
    names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    return [] if "schema_version" in names else [n for n in names if not n.startswith("sqlite_")]


def connect(path: str | Path, timeout: float = 30.0) -> sqlite3.Connection:
    conn = sqlite3.connect(str(path), timeout=timeout, isolation_level=None)  # explicit transactions
    try:
        retry_busy(lambda: conn.execute("PRAGMA journal_mode=WAL"))
        conn.execute("PRAGMA foreign_keys=ON")
        migrate(conn)
    except BaseException:
        conn.close()
        raise
    return conn


def migrate(conn: sqlite3.Connection) -> None:
    """Bring the schema to LATEST in one immediate transaction; idempotent and safe when
    several processes open the same new database at once."""
    if version(conn) == LATEST:  # the common case: nothing to write, no write lock taken
        broken = damage(conn)
        if broken:
            raise StackwarsError(f"this results database is damaged: {broken}; nothing was changed in it (give "
                                 f"another --db, or restore it from a copy)")
        return
    retry_busy(lambda: _migrate_locked(conn))


def _migrate_locked(conn: sqlite3.Connection) -> None:
    conn.execute("BEGIN IMMEDIATE")  # the write lock first, then the version: no two processes migrate
    try:
        foreign = foreign_tables(conn)
        if foreign:
            raise StackwarsError(f"this SQLite file is not a stackwars results database (it holds other "
                                 f"tables: {', '.join(sorted(foreign)[:5])}); give another --db")
        broken = damage(conn)
        if broken:
            raise StackwarsError(f"this results database is damaged: {broken}; nothing was changed in it (give "
                                 f"another --db, or restore it from a copy)")
        current = version(conn)
        if current > LATEST:
            raise StackwarsError(f"results database schema version {current} is newer than this stackwars "
                                 f"understands ({LATEST}); upgrade stackwars to read it")
        conn.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY, "
                     "applied_at TEXT NOT NULL)")
        for v in range(current + 1, LATEST + 1):
            for statement in _split(MIGRATIONS[v - 1]):
                conn.execute(statement)
            conn.execute("INSERT INTO schema_version (version, applied_at) VALUES (?, ?)", (v, now()))
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:  # SQLite itself rolls back on some errors (a full disk)
            conn.execute("ROLLBACK")
        raise


def _split(script: str) -> list[str]:
    """Split a script into complete statements (``sqlite3.complete_statement`` knows that
    a ';' inside a trigger body does not end the CREATE TRIGGER)."""
    out, buf = [], ""
    for piece in script.split(";"):
        buf += piece + ";"
        if sqlite3.complete_statement(buf):
            if buf.strip(" \n;"):
                out.append(buf.strip())
            buf = ""
    return out
