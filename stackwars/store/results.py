"""Reading and writing runs, cells and device peaks.

The database path comes from, in order: the ``--db`` option, ``STACKWARS_DB``,
``./stackwars.db``. Every cell is written in its own transaction the moment its worker
returns, so an interrupted run loses only the cell in flight and ``--resume`` measures
what its plan still lacks.
"""

from __future__ import annotations

import json
import os
import secrets
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Mapping

from stackwars.errors import SpecError
from stackwars.records import CellSpec, Measurement, MeasureConfig, _json_default
from stackwars.store import db

DEFAULT_DB = "stackwars.db"


def db_path(option: str | os.PathLike | None = None) -> Path:
    return Path(option or os.environ.get("STACKWARS_DB") or DEFAULT_DB)


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


class Store:
    def __init__(self, path: str | os.PathLike | None = None, create: bool = True):
        self.path = db_path(path)
        if not create and not self.path.exists():
            raise SpecError(f"no results database at {self.path}; run `stackwars run ...` first, "
                            f"or point --db / STACKWARS_DB at an existing one")
        self.conn = db.connect(self.path)

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
        with self._tx():
            self.conn.execute("INSERT INTO runs (run_id, created_at, kind, command, config_json) VALUES (?,?,?,?,?)",
                              (run_id, db.now(), kind, command, _dumps(config)))
            self.conn.executemany(
                "INSERT INTO run_plan (run_id, position, cell_key, spec_json) VALUES (?,?,?,?)",
                [(run_id, i, s.key, _dumps(s.to_dict())) for i, s in enumerate(plan)])
        return run_id

    def start_session(self, run_id: str, env: Mapping[str, Any]) -> int:
        with self._tx():
            cur = self.conn.execute("INSERT INTO sessions (run_id, started_at, env_json) VALUES (?,?,?)",
                                    (run_id, db.now(), _dumps(env)))
        return int(cur.lastrowid)

    def add_cell(self, run_id: str, session_id: int, m: Measurement) -> None:
        row = m.to_row()
        s = m.spec
        with self._tx():
            self.conn.execute(
                """INSERT INTO cells (run_id, session_id, cell_key, created_at, workload, preset, phase, backend,
                   framework, device, dtype, status, first_call_s, second_call_s, steady_median_s, compile_s,
                   peak_memory_bytes, parity_max_rel_err, record_json)
                   VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)""",
                (run_id, session_id, s.key, db.now(), s.workload, s.preset, s.phase, s.backend, m.framework,
                 s.device, s.dtype, m.status, row["first_call_s"], row["second_call_s"], row["steady_median_s"],
                 row["compile_s"], row["peak_memory_bytes"], row["parity_max_rel_err"], m.to_json()))

    def add_peak(self, device_key: str, dtype: str, matmul_precision: str, flops_per_s: float | None,
                 bytes_per_s: float | None, record: Mapping[str, Any], env: Mapping[str, Any]) -> int:
        with self._tx():
            cur = self.conn.execute(
                """INSERT INTO peaks (created_at, device_key, dtype, matmul_precision, flops_per_s, bytes_per_s,
                   record_json, env_json) VALUES (?,?,?,?,?,?,?,?)""",
                (db.now(), device_key, dtype, matmul_precision, flops_per_s, bytes_per_s, _dumps(record), _dumps(env)))
        return int(cur.lastrowid)

    class _Tx:
        def __init__(self, conn):
            self.conn = conn

        def __enter__(self):
            self.conn.execute("BEGIN IMMEDIATE")

        def __exit__(self, exc_type, *rest):
            self.conn.execute("ROLLBACK" if exc_type else "COMMIT")

    def _tx(self) -> "Store._Tx":
        return Store._Tx(self.conn)

    # ---- reading -------------------------------------------------------------------------
    def run_ids(self, kind: str | None = None) -> list[str]:
        q = "SELECT run_id FROM runs" + (" WHERE kind = ?" if kind else "") + " ORDER BY created_at, run_id"
        return [r[0] for r in self.conn.execute(q, (kind,) if kind else ())]

    def latest_run_id(self, kind: str | None = "cells") -> str | None:
        ids = self.run_ids(kind)
        return ids[-1] if ids else None

    def run(self, run_id: str) -> RunInfo:
        row = self.conn.execute("SELECT run_id, created_at, kind, command, config_json FROM runs WHERE run_id = ?",
                                (run_id,)).fetchone()
        if row is None:
            known = ", ".join(self.run_ids()[-5:]) or "none"
            raise SpecError(f"no run {run_id!r} in {self.path}; latest runs: {known}")
        plan = tuple(json.loads(r[0]) for r in self.conn.execute(
            "SELECT spec_json FROM run_plan WHERE run_id = ? ORDER BY position", (run_id,)))
        env_row = self.conn.execute("SELECT env_json FROM sessions WHERE run_id = ? ORDER BY session_id LIMIT 1",
                                    (run_id,)).fetchone()
        return RunInfo(row[0], row[1], row[2], row[3], json.loads(row[4]), plan,
                       json.loads(env_row[0]) if env_row else {})

    def cells(self, run_id: str | None = None) -> list[tuple[str, Measurement]]:
        q = "SELECT run_id, record_json FROM cells"
        args: tuple = ()
        if run_id is not None:
            q += " WHERE run_id = ?"
            args = (run_id,)
        return [(r[0], Measurement.from_dict(json.loads(r[1]))) for r in self.conn.execute(q + " ORDER BY id", args)]

    def missing(self, run_id: str) -> list[CellSpec]:
        done = {r[0] for r in self.conn.execute("SELECT cell_key FROM cells WHERE run_id = ?", (run_id,))}
        return [s for s in self.run(run_id).plan if s.key not in done]

    def add_study_rows(self, run_id: str, session_id: int, study: str, item_key: str,
                       rows_: Iterable[Mapping[str, Any]]) -> None:
        """All rows of one study item (one training, one recompile sequence) in one transaction."""
        stamp = db.now()
        with self._tx():
            self.conn.executemany(
                "INSERT INTO study_rows (run_id, session_id, study, item_key, created_at, row_json) VALUES (?,?,?,?,?,?)",
                [(run_id, session_id, study, item_key, stamp, _dumps(r)) for r in rows_])

    def study_rows(self, run_id: str, study: str | None = None) -> list[dict[str, Any]]:
        q = "SELECT item_key, row_json FROM study_rows WHERE run_id = ?" + (" AND study = ?" if study else "")
        args = (run_id, study) if study else (run_id,)
        return [{"item_key": k, **json.loads(r)} for k, r in self.conn.execute(q + " ORDER BY id", args)]

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


def rows(store: Store, run_id: str | None = None) -> list[dict[str, Any]]:
    """Flat rows (Measurement.to_row plus run_id) for export and reports."""
    return [{"run_id": rid, **m.to_row()} for rid, m in store.cells(run_id)]


def load_results(db_file: str | os.PathLike | None = None):
    """Every stored cell as a pandas DataFrame, one row per cell, raw samples included."""
    import pandas as pd

    with Store(db_file, create=False) as store:
        return pd.DataFrame(rows(store))
