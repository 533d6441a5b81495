"""SQLite schema, versioned, with forward migrations.

``schema_version`` holds one row per applied migration. Opening a database applies the
missing migrations in order, each in its own transaction; a database written by a newer
stackwars (a version this code does not know) is refused rather than misread.
Results tables are append-only: triggers reject UPDATE and DELETE.
"""

from __future__ import annotations

import sqlite3
from datetime import datetime, timezone
from pathlib import Path

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


def connect(path: str | Path) -> sqlite3.Connection:
    conn = sqlite3.connect(str(path), timeout=30, isolation_level=None)  # explicit transactions
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA foreign_keys=ON")
    migrate(conn)
    return conn


def migrate(conn: sqlite3.Connection) -> None:
    current = version(conn)
    if current > LATEST:
        raise StackwarsError(f"results database schema version {current} is newer than this stackwars "
                             f"understands ({LATEST}); upgrade stackwars to read it")
    if current == 0:
        conn.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)")
    for v in range(current + 1, LATEST + 1):
        conn.execute("BEGIN")
        try:
            for statement in _split(MIGRATIONS[v - 1]):
                conn.execute(statement)
            conn.execute("INSERT INTO schema_version (version, applied_at) VALUES (?, ?)", (v, now()))
            conn.execute("COMMIT")
        except BaseException:
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
