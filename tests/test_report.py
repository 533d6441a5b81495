"""The seed-style table, rendered from hand-built records, against a golden file."""

from pathlib import Path

import pytest

from stackwars.report.tables import COLUMNS, to_text

from tests.factories import measurement

GOLDEN = Path(__file__).parent / "golden" / "gemm_table.txt"


def rows():
    ms = [
        measurement("torch-eager", samples=(1.0e-3, 1.1e-3, 0.9e-3, 1.05e-3, 1.0e-3, 0.95e-3)),
        measurement("torch-compile", samples=(0.98e-3, 1.12e-3, 0.92e-3, 1.04e-3, 1.01e-3, 0.97e-3)),
        measurement("jax-jit", samples=(2.0e-3, 2.1e-3, 1.9e-3, 2.05e-3, 2.0e-3, 1.95e-3), framework="jax"),
        measurement("jax-eager", status="oom", samples=(), framework="jax",
                    error="worker RSS 21.60 GiB exceeded the memory limit 21.00 GiB (watchdog killed it)"),
    ]
    return [m.to_row() for m in ms]


def test_table_matches_golden():
    text = to_text(rows(), "device: test CPU (2 logical CPUs)", width=200)
    assert text == GOLDEN.read_text()


def test_table_content():
    text = to_text(rows(), width=200)
    for c in COLUMNS:
        assert c in text
    lines = {line.split("│")[1].strip(): line for line in text.splitlines() if line.startswith("│")}
    assert "fastest" in lines["torch-eager"] or "fastest" in lines["torch-compile"]
    assert "~" in lines["torch-compile"] or "~" in lines["torch-eager"]  # 1% apart: not significant
    assert "2.0" in lines["jax-jit"] and "~" not in lines["jax-jit"]  # twice as slow: significant
    assert "oom" in lines["jax-eager"]
    assert "memory limit" in text  # failures are explained under the table


def test_repeated_cells_are_summarised_over_processes():
    from dataclasses import replace

    from stackwars.verdict.figures import combine_repeats

    def proc(backend, i, median):
        m = measurement(backend, samples=(median, median * 1.01, median * 0.99))
        return replace(m, spec=replace(m.spec, repeat=i)).to_row()

    rows = [proc("torch-eager", i, t) for i, t in enumerate((1.0e-3, 1.3e-3, 1.1e-3))]
    rows += [proc("jax-jit", i, t) for i, t in enumerate((2.0e-3, 2.1e-3, 1.9e-3))]
    combined = combine_repeats(rows)
    assert [r["backend"] for r in combined] == ["torch-eager", "jax-jit"]
    torch_row = combined[0]
    # the geometric mean of the per-process medians, with a hierarchical bootstrap CI around it
    assert torch_row["processes"] == 3 and torch_row["steady_median_s"] == pytest.approx((1.0e-3 * 1.3e-3 * 1.1e-3)
                                                                                          ** (1 / 3))
    assert torch_row["process_medians"] == [1.0e-3, 1.3e-3, 1.1e-3]
    assert torch_row["steady_ci_low_s"] < 1.0e-3 + 1e-9 and torch_row["steady_ci_high_s"] > 1.3e-3 - 1e-9
    assert torch_row["process_samples"][1] == [1.3e-3, 1.3e-3 * 1.01, 1.3e-3 * 0.99]
    text = to_text(rows, width=200)
    assert "3/3 procs" in text
    table = text.split("Processes that disagree")[0]
    assert len([line for line in table.splitlines() if "torch-eager" in line]) == 1  # one row per backend
    # its processes 1.0-1.3 ms apart (30%): explained beneath the table (verdict/spread.py)
    assert "torch-eager: process medians 1.00 ms (#0) to 1.30 ms (#1), +30%: eager: the same operators" in text


def test_a_busy_process_is_left_out_of_a_cells_estimate():
    from dataclasses import replace

    from stackwars.verdict.figures import combine_repeats

    def proc(i, median, contended=False):
        m = measurement("jax-jit", samples=(median, median * 1.01, median * 0.99), framework="jax")
        if contended:
            m = replace(m, settings={"contention": {"contended": True, "fraction": 0.4}})
        return replace(m, spec=replace(m.spec, repeat=i)).to_row()

    (row,) = combine_repeats([proc(0, 1e-3), proc(1, 1e-3), proc(2, 5e-3, contended=True)])
    assert row["steady_median_s"] == pytest.approx(1e-3) and row["processes_busy"] == 1
    assert not row["busy"] and row["processes_used"] == 2 and len(row["process_samples"]) == 2
    assert "1 busy left out (1 contended)" in to_text([proc(0, 1e-3), proc(1, 1e-3), proc(2, 5e-3, contended=True)],
                                                      width=200)
    # every process busy: no figure decides (nothing to rank or compare); what they read is kept apart, marked
    (row,) = combine_repeats([proc(0, 1e-3, True), proc(1, 1e-3, True)])
    assert row["busy"] and row["processes_used"] == 0 and row["process_samples"] == []
    assert row["steady_median_s"] is None and row["first_call_s"] is None and row["memory_added_bytes"] is None
    assert row["busy_figures"]["steady_median_s"] == pytest.approx(1e-3)
    text = to_text([proc(0, 1e-3, True), proc(1, 1e-3, True)], width=250)
    assert "busy 1.00 ms (2/2 procs, none clean)" in text and "(busy: 2 contended)" in text


def test_table_verdict_and_report_give_one_memory_figure():
    """The quickstart once showed jax-jit +4.4 MiB against torch +4.5 MiB in the table while the
    verdict said memory 0.55x: the table took the highest peak of any process over the first
    process's baseline, the verdict a median per process. One definition now (figures.added_memory:
    the steady-state peak over the worker's baseline before the first call, median over clean
    processes), read by the table, the verdict, the report's chart and the published claims."""
    from dataclasses import replace

    from stackwars.records import MemoryStats
    from stackwars import verdict as vd
    from stackwars.report import build, published
    from stackwars.report import verdict as view
    from stackwars.verdict.figures import combine_repeats, group_rows

    MiB = 2**20

    def proc(backend, i, base, steady, first_peak):
        m = measurement(backend, samples=(1e-3, 1.01e-3, 0.99e-3), framework=backend.split("-")[0])
        mem = MemoryStats(peak_rss_bytes=max(first_peak, steady), peak_rss_first_call_bytes=first_peak,
                          peak_rss_steady_bytes=steady, baseline_rss_bytes=base, rss_counter="VmHWM")
        return {**replace(m, spec=replace(m.spec, repeat=i), memory=mem).to_row(), "machine": "m", "run_id": "r"}

    rows = [proc("torch-eager", i, (300 + 10 * i) * MiB, (310 + 10 * i) * MiB, 330 * MiB) for i in range(3)]
    rows += [proc("jax-jit", i, (250 + 20 * i) * MiB, (255 + 20 * i) * MiB, 400 * MiB) for i in range(3)]
    # what each process added: torch 10 MiB each, jax-jit 5 MiB each (compiling's 400 MiB peak is the first call's)
    combined = {r["backend"]: r for r in combine_repeats(rows)}
    assert combined["torch-eager"]["memory_added_bytes"] == 10 * MiB
    assert combined["jax-jit"]["memory_added_bytes"] == 5 * MiB
    text = to_text(rows, width=250)
    lines = {line.split("│")[1].strip(): line for line in text.splitlines() if line.startswith("│")}
    assert "+10.0 MiB" in lines["torch-eager"] and "+5.0 MiB" in lines["jax-jit"]
    (v,) = vd.verdicts(rows)
    assert v["memory_ratio"] == pytest.approx(0.5)
    chart = {b: m for _, b, m in build.memory_points(group_rows(rows))}
    assert chart["jax-jit"] / chart["torch-eager"] == pytest.approx(0.5)
    s3_rows = [{**r, "backend": "torch-mlir-xla" if r["backend"] == "torch-eager" else r["backend"],
                "second_call_s": 1e-3} for r in rows]
    (_, memory) = published.s3(s3_rows)
    # 5 MiB against 10 MiB: under the size where a memory claim means anything on a host's RSS
    assert "jax-jit +5.0 MiB, torch-mlir-xla +10.0 MiB (no difference here)" in memory["ours"]
    assert memory["verdict"] == "no difference here" and v["memory_differs"] is False
    assert "0.50x (no difference here)" in view.cells(v)[7]
    # ten times the size, the processes apart: a difference, and the claim holds
    rows = [proc("torch-eager", i, 300 * MiB, (400 + i) * MiB, 330 * MiB) for i in range(3)]
    rows += [proc("jax-jit", i, 250 * MiB, (300 + i) * MiB, 400 * MiB) for i in range(3)]
    (v,) = vd.verdicts(rows)
    assert v["memory_differs"] is True and view.cells(v)[7] == "0.50x"
    (_, memory) = published.s3([{**r, "backend": "torch-mlir-xla" if r["backend"] == "torch-eager" else r["backend"],
                                 "second_call_s": 1e-3} for r in rows])
    assert memory["verdict"] == "holds here", memory
    # overlapping processes: no difference, however large the medians' gap
    rows = [proc("torch-eager", i, 300 * MiB, (400 + 60 * i) * MiB, 330 * MiB) for i in range(3)]
    rows += [proc("jax-jit", i, 250 * MiB, (340 + 60 * i) * MiB, 400 * MiB) for i in range(3)]
    (v,) = vd.verdicts(rows)
    assert v["memory_differs"] is False and "overlap" in v["memory_why"]


def test_first_and_second_call_come_from_clean_processes_only():
    """First Run 13.24 ms once stood where the one clean process took 0.40 ms: a median that
    included busy processes."""
    from dataclasses import replace

    from stackwars.verdict.figures import combine_repeats

    def proc(i, first, busy):
        m = replace(measurement("jax-jit", framework="jax"), first_call_s=first, second_call_s=first / 2)
        m = replace(m, spec=replace(m.spec, repeat=i))
        if busy:
            m = replace(m, settings={"contention": {"contended": True, "fraction": 0.5}})
        return m.to_row()

    (row,) = combine_repeats([proc(0, 13.24e-3, True), proc(1, 0.40e-3, False), proc(2, 14.0e-3, True)])
    assert row["first_call_s"] == pytest.approx(0.40e-3) and row["second_call_s"] == pytest.approx(0.20e-3)


def test_the_first_call_chart_draws_a_bar_pair_a_cell_and_marks_a_busy_one(tmp_path):
    """Issue 65: the first-call chart drew every process, three bars to one label, busy ones unmarked
    beside clean ones. One pair a cell, its clean processes' figures; a cell measured only while busy
    keeps its own, marked (labelled "(busy)", hatched)."""
    from stackwars.report import build
    from stackwars.verdict import figures
    from tests.test_verdict import _cell, _store

    cells = ([_cell("torch-eager", 1.0, p, first=0.5) for p in range(3)]
             + [_cell("jax-jit", 1.0, p, first=2.0, contended=True) for p in range(3)])
    _, found = _store(tmp_path / "r.db", cells)
    points = build.first_call_points(figures.group_rows(found))
    assert [(b, busy) for _, b, _, _, busy in points] == [("torch-eager", False), ("jax-jit", True)]
    assert points[0][2] == pytest.approx(0.5) and points[1][2] == pytest.approx(2.0)
    assert build.first_vs_steady_figure(figures.group_rows(found))[:8] == b"\x89PNG\r\n\x1a\n"
