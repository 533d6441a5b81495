"""`stackwars report`: the page from a small fixed database. The same data gives the same
bytes (apart from the generation time), claims follow the data (a difference inside the
noise is worded as such, and a claim goes when its data does), text from errors and
overrides is escaped, every figure is embedded, and the page needs no network."""

import dataclasses
import re
import sqlite3

import pytest
from typer.testing import CliRunner

from stackwars.cli import app
from stackwars.report import build, page
from stackwars.verdict import figures
from stackwars.store.results import Store
from tests.factories import measurement

runner = CliRunner()
FAST = (1.0e-3, 1.01e-3, 0.99e-3, 1.02e-3, 0.98e-3, 1.0e-3, 1.01e-3, 0.99e-3)


def _scaled(samples, k):
    return tuple(s * k for s in samples)


def _processes(m, n=4):
    """The cell measured in ``n`` processes, each 0.2% slower than the last (ratios unchanged): the
    first chooses each side's best, the other three decide."""
    return [dataclasses.replace(m, spec=dataclasses.replace(m.spec, repeat=p),
                                samples=_scaled(m.samples, 1 + 0.002 * p)) for p in range(n)]


def _db(path, torch_compile_factor=0.5, error="boom"):
    """gemm forward, four processes a cell: eager 1 ms, compiled factor x faster with a 0.5 s
    first call; jax-jit faster still; a torch-mlir-xla cell that failed with an error text
    full of markup."""
    cells = [*_processes(measurement("torch-eager", samples=FAST)),
             *_processes(dataclasses.replace(measurement("torch-compile", samples=_scaled(FAST, torch_compile_factor)),
                                             first_call_s=1.5)),
             *_processes(measurement("jax-eager", samples=_scaled(FAST, 3.0))),
             *_processes(dataclasses.replace(measurement("jax-jit", samples=_scaled(FAST, 0.25)), first_call_s=0.8)),
             measurement("torch-mlir-xla", status="error", samples=(), error=error)]
    with Store(path) as store:
        run_id = store.create_run([m.spec for m in cells], {"measure": {}}, command="stackwars run gemm <b>")
        session = store.start_session(run_id, {"cpu_model": "Test CPU", "cpus_available": 2,
                                               "versions": {"torch": "0", "jax": "0"}})
        for m in cells:
            store.add_cell(run_id, session, m)
    return path


def _report(db, out, *runs):
    result = runner.invoke(app, ["report", *runs, "--db", str(db), "--out", str(out)])
    assert result.exit_code == 0, result.output
    return (out / "report.html").read_text(), (out / "report.md").read_text()


def _without_time(text):
    return re.sub(r"generated \d{4}-\d\d-\d\d \d\d:\d\d UTC", "generated TIME", text)


def test_the_same_data_gives_the_same_page(tmp_path):
    db = _db(tmp_path / "r.db")
    html1, md1 = _report(db, tmp_path / "a")
    html2, md2 = _report(db, tmp_path / "b")
    assert _without_time(html1) == _without_time(html2) and _without_time(md1) == _without_time(md2)
    assert (tmp_path / "a" / "figures" / "speedup-heatmap.png").read_bytes() == \
        (tmp_path / "b" / "figures" / "speedup-heatmap.png").read_bytes()


def test_the_page_is_self_contained_and_escapes_what_it_quotes(tmp_path):
    db = _db(tmp_path / "r.db", error="<script>alert('x')</script> & <img src=x onerror=alert(1)>")
    html, md = _report(db, tmp_path / "out")
    assert "<script" not in html and "onerror=alert(1)>" not in html
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in html
    assert "stackwars run gemm &lt;b&gt;" in html  # the command, as text
    # a command in a table cell is code, as report.md's backticks say, not backticks shown as text
    assert "<td><code>stackwars run gemm" in html and "<td>`stackwars" not in html
    assert not re.search(r"(src|href)=\"(https?:)?//", html)  # nothing fetched when viewed
    figures = re.findall(r'<img alt="[^"]*" src="data:image/png;base64,', html)
    assert len(figures) == 4  # the verdict's forest plot, the heatmap, first call vs steady, memory: embedded
    assert "<script" not in md and "&lt;script&gt;" in md
    assert "(figures/speedup-heatmap.png)" in md


def _section(md, title):
    """The Markdown of one section of the page."""
    start = md.index(f"## {title}")
    end = md.find("\n## ", start + 1)
    return md[start:end if end >= 0 else None]


def test_the_report_opens_with_the_verdict(tmp_path):
    _, md = _report(_db(tmp_path / "r.db"), tmp_path / "a")
    sections = re.findall(r"^## (.+)$", md, flags=re.M)
    assert sections[0] == "Verdict: JAX or PyTorch"
    verdict = _section(md, "Verdict: JAX or PyTorch")
    # best PyTorch (torch-compile, 0.5 ms) against best JAX (jax-jit, 0.25 ms), each chosen on its first
    # process: JAX faster, 0.5x (times: the geometric mean of the three deciding processes' medians, 1.002,
    # 1.004 and 1.006 x the base), three paired rounds
    assert "| gemm · small · forward · cpu · float32 | torch-compile 502.0 µs | jax-jit 251.0 µs | 0.500 (" in verdict
    assert "| JAX faster | 3 · throughput · paired rounds | torch-compile 1,996 calls / jax-jit 110 calls |" in verdict
    assert "Test CPU (? CPUs) · torch 0 · jax 0: 1 verdict(s): 1 JAX faster" in verdict
    assert "(figures/verdict-forest-1.png)" in verdict


def test_the_decision_guide_follows_the_data(tmp_path):
    _, md = _report(_db(tmp_path / "r.db"), tmp_path / "a")
    guide = _section(md, "Mode by mode")
    assert "use jax-jit; the next, torch-compile, takes 2.00x its time" in guide
    assert "gemm · small · forward · cpu · float32: error for torch-mlir-xla" in guide
    assert "pays for its first call (" not in guide  # the break-even table says it, once
    # 1.0 s more on the first call, 0.5015 ms saved a call (geometric means of four processes): paid back
    # after 1,996 calls
    breakeven = _section(md, "Compile break-even")
    assert "| torch-compile | torch-eager | 1.00 s | 501.5 µs | after 1,996 calls |" in breakeven
    assert "| jax-jit | jax-eager | 300.00 ms | 2.76 ms | after 110 calls |" in breakeven
    # the compiled step no faster than eager: the break-even becomes "never pays"
    _, md = _report(_db(tmp_path / "n.db", torch_compile_factor=1.5), tmp_path / "n")
    assert "never pays: its steady state is not faster" in _section(md, "Compile break-even")
    # jax-jit and torch-compile inside each other's noise: no winner is claimed
    _, md = _report(_db(tmp_path / "s.db", torch_compile_factor=0.251), tmp_path / "s")
    assert "jax-jit and torch-compile cannot be told apart" in md and "not significant" in md


def test_bad_report_input_exits_2_and_writes_nothing(tmp_path):
    result = runner.invoke(app, ["report", "--db", str(tmp_path / "none.db"), "--out", str(tmp_path / "out")])
    assert result.exit_code == 2 and "no results database" in result.output
    db = _db(tmp_path / "r.db")
    result = runner.invoke(app, ["report", "20990101-000000-dead", "--db", str(db), "--out", str(tmp_path / "o2")])
    assert result.exit_code == 2 and "no run 20990101-000000-dead" in result.output
    assert not (tmp_path / "out").exists() and not (tmp_path / "o2").exists()
    conn = sqlite3.connect(tmp_path / "empty.db")
    conn.close()
    result = runner.invoke(app, ["report", "--db", str(tmp_path / "empty.db"), "--out", str(tmp_path / "o3")])
    assert result.exit_code == 2 and not (tmp_path / "o3").exists()


def test_figures_must_be_pngs_with_plain_names():
    with pytest.raises(ValueError, match="not a PNG"):
        page.Figure("x", b"GIF89a", "c")
    with pytest.raises(ValueError, match="letters, digits"):
        page.Figure("../x", b"\x89PNG\r\n\x1a\n", "c")
    assert figures.EAGER_OF["jax-jit"] == "jax-eager"


def test_published_claims_get_verdicts_from_the_data():
    from stackwars.report import published

    # S4: 0.0012 s an epoch needs more than the card can do, whatever we measured
    (timing, accuracy) = published.s4([])
    assert timing["verdict"] == "impossible" and "x the card's float32 peak" in timing["ours"]
    assert published.mlp_epoch_flops() == 6 * (784 * 512 + 512 * 512 + 512 * 10) * 50_000
    assert accuracy["verdict"] == published.NOT_MEASURED
    rows = [{"status": "ok", "epoch": e, "backend": b, "batch_size": 64, "epoch_s": 2.0, "samples": 50_000,
             "val_acc": acc} for b, acc in (("jax-jit", 0.975), ("torch-eager", 0.974)) for e in (1, 2)]
    _, accuracy = published.s4(rows)
    assert accuracy["verdict"] == "does not hold here" and "97.4%" in accuracy["why"]
    # S3: a PyTorch second call far from its steady state, JAX's at it
    def cell(backend, second, peak, added):
        return {"status": "ok", "workload": "gpt2", "preset": "small", "phase": "train-step", "device": "cpu",
                "dtype": "float32", "backend": backend, "second_call_s": second, "steady_median_s": 1.0,
                "peak_memory_bytes": peak, "peak_rss_steady_bytes": peak, "baseline_rss_bytes": peak - added}
    # memory: what the computation added (the verdict's figure), not a process's whole RSS, which is
    # mostly what each framework takes to load: jax-jit's total is higher, what it added lower
    warm, memory = published.s3([cell("jax-jit", 1.1, 3e9, 1e9), cell("torch-mlir-xla", 30.0, 2.5e9, 2e9)])
    assert warm["verdict"] == "holds here" and memory["verdict"] == "holds here", memory
    assert "jax-jit +953.7 MiB, torch-mlir-xla +1.9 GiB" in memory["ours"] and "verdict's memory ratio" in memory["why"]
    _, memory = published.s3([cell("jax-jit", 1.1, 3e9, 2.5e9), cell("torch-mlir-xla", 30.0, 2.5e9, 2e9)])
    assert memory["verdict"] == "does not hold here"
    warm, _ = published.s3([cell("jax-jit", 1.1, 3e9, 1e9), cell("torch-mlir-xla", 1.2, 2e9, 1e9)])
    assert warm["verdict"] == "does not hold here"
    (s5,) = published.s5([{"status": "ok", "s5_vs_ours": 3.0}, {"status": "ok", "s5_vs_ours": 1.1}])
    assert s5["verdict"] == "does not hold here" and "1 of 2 cells" in s5["why"]


def test_s2_memory_and_s1_questions_follow_the_anatomy_and_the_profiles():
    from stackwars.report import published

    def anatomy(backend, total, cell="gpt2/small/train-step/{}/cpu/float32"):
        return {"cell": cell.format(backend), "backend": backend, "sum_bytes": total, "not_measured": [],
                "parts": {}}
    (claim,) = published.s2_memory([anatomy("jax-jit", 1.74 * 2**30), anatomy("torch-eager", 2.19 * 2**30),
                                    anatomy("torch-compile", 2.0 * 2**30)])
    assert claim["verdict"] == "holds here"
    assert "jax-jit 1.7 GiB (XLA's plan) vs torch-compile 2.0 GiB" in claim["ours"]  # the smaller PyTorch one
    (claim,) = published.s2_memory([anatomy("jax-jit", 3 * 2**30), anatomy("torch-eager", 2 * 2**30)])
    assert claim["verdict"] == "does not hold here"
    # eager JAX's anatomy misses activations: not comparable, so nothing is claimed from it
    (claim,) = published.s2_memory([{**anatomy("jax-jit", 1), "not_measured": ["activations"]},
                                    anatomy("torch-eager", 2)])
    assert claim["verdict"] == published.NOT_MEASURED
    answered = {c["claim"]: c["verdict"] for c in published.s1([], {"study:scaling"}, [{"cell": "x"}])}
    assert answered["vmap/pmap/pjit vs DDP/FSDP, multi-device scaling"] == "answered here"
    assert answered["CPU<->GPU transfers and where the time goes"] == "answered here"
    assert answered["recompilation triggers and caching"] == published.NOT_MEASURED


def test_ir_excerpts_are_quoted_as_text(tmp_path):
    ir = tmp_path / "ir"
    ir.mkdir()
    (ir / "summary.json").write_text('{"cell": "mha/small/forward", "jax": {"stablehlo": {"n_ops": 12, '
                                     '"ops": {"stablehlo.dot_general": 4}}}}')
    (ir / "jax.stablehlo.mlir").write_text("func.func @main(%arg0: tensor<4x16xf32>) -> tensor<4x16xf32> {\n"
                                           "  // </pre><script>alert(1)</script>\n" + "  op\n" * 100)
    # an HLO module's text opens with XLA's source-location tables: the excerpt starts at the program
    (ir / "jax.hlo.txt").write_text("HloModule jit_forward\nFileNames\n1 \"/tmp/x.py\"\nFunctionNames\n1 \"f\"\n"
                                    "StackFrames\n1 {file_location_id=1}\n\n%fused_computation (p: f32[4]) -> f32[4] {\n"
                                    "  ROOT %r = f32[4] add(%p, %p)\n}\n")
    html, md = _report(_db(tmp_path / "r.db"), tmp_path / "out", "--ir", str(ir))
    assert "tensor&lt;4x16xf32&gt;" in html and "<script>" not in html
    assert "jax.stablehlo.mlir: the first 40 of 102 lines" in html
    assert "stablehlo.dot_general 4" in md
    excerpt = md[md.index("HloModule jit_forward"):]
    assert excerpt.split("\n")[1].startswith("%fused_computation") and "FileNames" not in excerpt[:200]
    assert "(after 7 lines of source-location metadata)" in md
    assert str(tmp_path) not in md and "of the dump ir/" in md  # no temporary path cited
    bad = runner.invoke(app, ["report", "--db", str(tmp_path / "r.db"), "--ir", str(tmp_path), "--out",
                              str(tmp_path / "o")])
    assert bad.exit_code == 2 and "no summary.json" in " ".join(bad.output.split())


def test_s3_table_and_call_overhead_beside_ours():
    from stackwars.report import published

    cells = [{"workload": "gpt2", "backend": "jax-jit", "phase": "forward", "status": "ok", "preset": "small",
              "device": "cpu", "dtype": "float32", "first_call_s": 1.3, "second_call_s": 0.14,
              "steady_median_s": 0.133},
             {"workload": "gpt2", "backend": "torch-mlir-xla", "phase": "forward", "status": "oom", "preset": "small",
              "device": "cpu", "dtype": "float32"}]
    rows = {r[0]: r for r in published.s3_table(cells)}
    assert rows["gpt2"] == ("gpt2", "2128.44 / 1.061 / 0.708", "3545.75 / 3256.95 / 27.896", "1.3e+03 / 140 / 133",
                            "oom", "small, cpu, float32")
    assert rows["vit-b16"][2] == "OOM" and rows["mha"][3] == "not measured"
    def r(backend, impl, t):
        return {"status": "ok", "batch": 1, "op": "dot", "backend": backend, "impl": impl, "steady_median_s": t,
                "label": f"{backend} {impl}"}
    (claim,) = published.s2_overhead([r("jax-jit", "batched", 9e-6), r("torch-eager", "batched", 3e-6)])
    assert claim["verdict"] == "does not hold here" and "9.0 µs" in claim["ours"]
    (claim,) = published.s2_overhead([])
    assert claim["verdict"] == published.NOT_MEASURED


def test_the_report_folder_keeps_the_traces_it_names(tmp_path):
    trace = tmp_path / "profiles" / "run-1" / "gemm.trace.json.gz"
    trace.parent.mkdir(parents=True)
    trace.write_bytes(b"\x1f\x8b trace")
    profiles = [{"trace": str(trace)}, {"trace": str(tmp_path / "gone" / "x.trace.json.gz")}, {"trace": None}]
    build.keep_traces(profiles, tmp_path / "out")
    assert profiles[0]["trace"] == "traces/run-1/gemm.trace.json.gz"
    assert (tmp_path / "out" / profiles[0]["trace"]).read_bytes() == b"\x1f\x8b trace"
    assert profiles[1]["trace"] == "x.trace.json.gz (no longer on disk)" and profiles[2]["trace"] is None


def test_heatmap_colour_is_clipped_and_memory_chart_plots_what_it_says():
    from stackwars.report.build import HEATMAP_CLIP, MEMORY_LABEL, heatmap_colour, memory_points

    # an interpreted kernel 9,791x slower saturates the scale instead of stretching it
    assert heatmap_colour(9791.0) == heatmap_colour(HEATMAP_CLIP) == 3.0
    assert heatmap_colour(2.6) > heatmap_colour(1.0) + 1.3  # 1x and 2.6x stay apart
    assert heatmap_colour(0.4) == -1.0 and heatmap_colour(1.0) == 0.0  # below 1: its own side of the scale
    # the chart plots the memory each cell added (its steady peak over the baseline), per process median
    cells = [dataclasses.replace(m, memory=dataclasses.replace(m.memory, peak_rss_steady_bytes=(250 + 10 + i) * 2**20))
             for i, m in enumerate(_processes(measurement("jax-jit", samples=FAST), 3))]
    groups = figures.group_rows([m.to_row() for m in cells])
    (point,) = memory_points(groups)
    assert point[1] == "jax-jit" and point[2] == 11 * 2**20  # median of 10, 11, 12 MiB added; the total was 260+
    assert "added" in MEMORY_LABEL and "over the worker's baseline" in MEMORY_LABEL


def test_the_report_stands_alone(tmp_path):
    """No link or path outside the repository; every claim names its study (what it is, where it
    ran); a figure from another device (S3's TPU) stands beside ours only under a warning."""
    from stackwars.report import published

    html, md = _report(_db(tmp_path / "r.db"), tmp_path / "a")
    for text in (html, md):
        assert "../shared" not in text and "STUDIES.md" not in text
        assert not re.search(r"\]\((?!figures/|traces/|#)[^)]+\)", md)  # Markdown links: only the report's own files
    section = _section(md, "The published studies beside ours")
    for sid, (title, where, _) in published.STUDIES.items():
        assert f"| {sid} | {title} | {where} |" in section, sid
    claims = [line for line in section.splitlines() if line.startswith("| S") and "(" in line.split("|")[1]]
    assert claims and all(re.match(r"\| S\d \([^)]+\) \|", line) for line in claims), claims[:3]
    assert "⚠ Another device: S3's figures below come from a TPU v6e-1 and ours from Test CPU" in section


def test_each_published_question_has_their_figure_ours_and_the_verdict_with_its_interval(tmp_path):
    """Issue 66's table: each study's question, the figure the study gave, ours, and the verdict with
    its interval or why none. S3's speed question reads the table's verdict (best against best, the
    interval at the level it spent) beside S3's own steady states; a workload not measured says so
    and which command measures it; a question S3 gave no figure for says none was published."""
    _, md = _report(_db(tmp_path / "r.db"), tmp_path / "a")
    pub = _section(md, "The published studies beside ours")
    assert "| study | question or claim | their figure | our figure | verdict | why |" in pub
    gemm = next(line for line in pub.splitlines() if "gemm: same backend" in line)
    assert "JAX 0.192 ms, PyTorch/XLA 0.055 ms: JAX/PyTorch 3.49" in gemm  # S3's figure, TPU
    assert "steady state (median), jax-jit 250.7 µs, torch-mlir-xla error" in gemm  # that cell failed
    assert "JAX faster: JAX/PyTorch 0.500 (" in gemm and "torch-compile 502.0 µs against jax-jit 251.0 µs" in gemm
    ffn = next(line for line in pub.splitlines() if "ffn: same backend" in line)
    assert "not measured in these runs" in ffn and "stackwars run ffn --phase forward" in ffn
    neo = next(line for line in pub.splitlines() if "gpt-neo-1.3b: same backend" in line)
    assert "JAX 4.883 ms, PyTorch/XLA out of memory (32 GB HBM)" in neo
    # both sides out of memory on S3's TPU, not run here: the cells' own estimate at S3's size is our figure
    llama = next(line for line in pub.splitlines() if "llama3-8b: same backend" in line)
    assert "JAX and PyTorch/XLA out of memory (32 GB HBM)" in llama and "not measured in these runs" in llama
    assert "34.3 GiB in float32 (weights 29.9): over S3's 29.8 GiB" in llama
    assert "17.1 GiB in bfloat16 (weights 15.0): under S3's 29.8 GiB" in llama
    s4 = next(line for line in pub.splitlines() if "final validation accuracy" in line)
    assert "JAX 15.29% / 15.57% / 15.51%; PyTorch 6.71% / 14.01% / 9.95% (batch 64 / 256 / 1024)" in s4
    assert any("none published" in line for line in pub.splitlines() if line.startswith("| S1 "))
