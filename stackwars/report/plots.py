"""Plots of the studies (PNG, matplotlib's Agg backend: no display needed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence


def plt_agg():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


STYLE = {"torch-eager": ("tab:red", "--"), "torch-compile": ("tab:orange", "-"),
         "jax-eager": ("tab:cyan", "--"), "jax-jit": ("tab:blue", "-")}


def save(fig, path: Path) -> Path:
    """Lay out, write and close a figure (the same bytes for the same data)."""
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt_agg().close(fig)
    return path


def to_png(fig) -> bytes:
    """A figure as PNG bytes, closed after (no version stamp: the same data gives the same bytes)."""
    import io
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, metadata={"Software": None})
    plt_agg().close(fig)
    return buf.getvalue()


def control_flow(rows: Sequence[Mapping[str, Any]], out_dir: Path) -> list[Path]:
    """One PNG per workload: first call, steady state and memory against n (log-log), a line
    per backend x impl (x remat), forward and train-step in two rows."""
    from stackwars.studies.control_flow import series

    plt = plt_agg()
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for workload in dict.fromkeys(r["workload"] for r in rows):
        mine = [r for r in rows if r["workload"] == workload]
        phases = list(dict.fromkeys(r["phase"] for r in mine))
        fig, axes = plt.subplots(len(phases), 3, figsize=(15, 4.2 * len(phases)), squeeze=False)
        for i, phase in enumerate(phases):
            for (w, ph, backend, impl, remat), rs in series(r for r in mine if r["phase"] == phase).items():
                ok = [r for r in rs if r["status"] in ("ok", "parity_fail")]
                if not ok:
                    continue
                colour, line = STYLE.get(backend, ("tab:gray", "-"))
                label = f"{backend} · {impl}" + (" · remat" if remat else "")
                marker = "o" if not remat else "x"
                for j, key in enumerate(("compile_s", "steady_median_s", "memory_added_bytes")):
                    pts = [(r["n"], r[key]) for r in ok if r[key]]
                    if pts:
                        axes[i][j].plot(*zip(*pts), line, marker=marker, color=colour, label=label,
                                        alpha=0.55 if impl == "python" else 1.0)
            for j, what in enumerate(("first call's compile (s)", "steady state per call (s)", "memory added (bytes)")):
                ax = axes[i][j]
                ax.set_xscale("log")
                ax.set_yscale("log")
                ax.set_xlabel("n (loop length)")
                ax.set_title(f"{workload} {phase}: {what}", fontsize=9)
                ax.grid(alpha=0.3, which="both")
        axes[0][0].legend(fontsize=6)
        written.append(save(fig, out_dir / f"control-flow-{workload}.png"))
    return written


def vmap(rows: Sequence[Mapping[str, Any]], out_dir: Path) -> list[Path]:
    """One PNG per op: time per call against batch size (log-log), a line per way of
    batching; S5's reading of the same cells dotted."""
    plt = plt_agg()
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for op in dict.fromkeys(r["op"] for r in rows):
        fig, ax = plt.subplots(1, 2, figsize=(13, 4.8))
        mine = [r for r in rows if r["op"] == op and r["status"] == "ok"]
        for key in dict.fromkeys((r["backend"], r["impl"]) for r in mine):
            rs = sorted((r for r in mine if (r["backend"], r["impl"]) == key), key=lambda r: r["batch"])
            colour, line = STYLE.get(key[0], ("tab:gray", "-"))
            marker = {"loop": "o", "vmap": "s", "batched": "^"}.get(key[1], "x")
            label = rs[0]["label"]
            ax[0].plot([r["batch"] for r in rs], [r["steady_median_s"] for r in rs], line, marker=marker,
                       color=colour, label=label)
            s5 = [(r["batch"], r["s5_per_call_s"]) for r in rs if r.get("s5_per_call_s")]
            if s5:
                ax[1].plot(*zip(*s5), ":", marker=marker, color=colour, label=f"{label} (S5's method)")
                ax[1].plot([r["batch"] for r in rs], [r["steady_median_s"] for r in rs], line, color=colour,
                           alpha=0.3)
        for a, title in zip(ax, ("harness: synchronised steady state", "S5's method (dotted) over the harness")):
            a.set_xscale("log")
            a.set_yscale("log")
            a.set_xlabel("batch size")
            a.set_ylabel("seconds per call")
            a.set_title(f"{op}: {title}", fontsize=9)
            a.grid(alpha=0.3, which="both")
            a.legend(fontsize=6)
        written.append(save(fig, out_dir / f"vmap-{op}.png"))
    return written


def stream(rows: Sequence[Mapping[str, Any]], out_dir: Path, name: str) -> Path:
    """Cumulative time over the requests, a line per backend x policy; compiling requests marked."""
    plt = plt_agg()
    out_dir.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(9, 5))
    for key in dict.fromkeys((r["backend"], r["policy"]) for r in rows):
        rs = sorted((r for r in rows if (r["backend"], r["policy"]) == key), key=lambda r: r["request"])
        total, xs, ys, marks = 0.0, [], [], []
        for r in rs:
            total += r["call_s"]
            xs.append(r["request"])
            ys.append(total)
            if r["compiled"]:
                marks.append((r["request"], total))
        colour, line = STYLE.get(key[0], ("tab:gray", "-"))
        ax.plot(xs, ys, line, color=colour, label=f"{key[0]} · {key[1]}",
                alpha=1.0 if key[1] in ("eager", "buckets") else 0.6)
        if marks:
            ax.plot(*zip(*marks), "x", color=colour, ms=4)
    ax.set_yscale("log")
    ax.set_xlabel("request")
    ax.set_ylabel("cumulative seconds (x: a request that compiled)")
    ax.set_title(f"{name}: serving a stream of variable-length requests", fontsize=10)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7)
    return save(fig, out_dir / f"stream-{name}.png")


def scaling(rows: Sequence[Mapping[str, Any]], out_dir: Path, name: str) -> Path:
    """Throughput against device count (a line per framework and strategy, the ideal dashed)
    and the bytes of parameters and optimizer state per device, per scaling."""
    plt = plt_agg()
    out_dir.mkdir(parents=True, exist_ok=True)
    scalings = list(dict.fromkeys(r["scaling"] for r in rows))
    fig, axes = plt.subplots(1, len(scalings) + 1, figsize=(6 * (len(scalings) + 1), 4.5), squeeze=False)
    ok = [r for r in rows if r["status"] == "ok" and r.get("samples_per_s")]
    colours = {"jax": "tab:orange", "torch": "tab:blue"}
    lines = {"dp": "-", "fsdp": "--", "shard_map": "-.", "pmap": ":"}
    for ax, scaling in zip(axes[0], scalings):
        for key in dict.fromkeys((r["framework"], r["strategy"]) for r in ok if r["scaling"] == scaling):
            rs = sorted((r for r in ok if (r["framework"], r["strategy"]) == key and r["scaling"] == scaling),
                        key=lambda r: r["devices"])
            ax.plot([r["devices"] for r in rs], [r["samples_per_s"] for r in rs], lines.get(key[1], "-"),
                    marker="o", color=colours.get(key[0], "gray"), label=f"{key[0]} {key[1]}")
            one = [r for r in rs if r["devices"] == 1]
            if one:
                ns = [r["devices"] for r in rs]
                ax.plot(ns, [one[0]["samples_per_s"] * n for n in ns], ":", color=colours.get(key[0], "gray"),
                        alpha=0.3)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("devices")
        ax.set_ylabel("examples per second")
        ax.set_title(f"{name}: {scaling} scaling (dotted: linear from N=1)", fontsize=9)
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=7)
    ax = axes[0][-1]
    mem = [r for r in rows if r["status"] in ("ok", "parity_fail") and r.get("state_bytes_per_device")
           and r["scaling"] == scalings[0]]
    for key in dict.fromkeys((r["framework"], r["strategy"]) for r in mem):
        rs = sorted((r for r in mem if (r["framework"], r["strategy"]) == key), key=lambda r: r["devices"])
        ax.plot([r["devices"] for r in rs], [r["state_bytes_per_device"] / 2**20 for r in rs],
                lines.get(key[1], "-"), marker="s", color=colours.get(key[0], "gray"), label=f"{key[0]} {key[1]}")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("devices")
    ax.set_ylabel("MiB per device")
    ax.set_title("parameters + optimizer state per device (measured)", fontsize=9)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7)
    return save(fig, out_dir / f"scaling-{name}.png")


def sensitivity(rows) -> bytes | None:
    """Rows x knobs as coloured cells: each changed row's verdict's colour, its ratio JAX/PyTorch
    written in it, a heavy border where the verdict flips; grey where the knob is not here or
    was not measured (past the study's budget: said so in the cell)."""
    knobs = list(dict.fromkeys(k for r in rows for k in r["knobs"]))
    if not rows or not knobs:
        return None
    plt = plt_agg()
    colour = {"JAX faster": "#9ecae1", "PyTorch faster": "#fc9272", "same speed": "#a1d99b",
              "no difference found": "#d9f0a3", "cannot say": "#fdd0a2"}
    fig, ax = plt.subplots(figsize=(2.2 + 1.25 * (len(knobs) + 1), 0.9 + 0.45 * len(rows)))
    columns = ["stored", *knobs]
    for i, r in enumerate(rows):
        cells = [{"verdict": r["verdict"], "ratio": r.get("ratio"), "outcome": "stored"}] + \
            [r["knobs"].get(k) or {"outcome": "not here"} for k in knobs]
        for j, c in enumerate(cells):
            here = c["outcome"] != "not here" and c.get("verdict")
            ax.add_patch(plt.Rectangle((j, i), 1, 1, facecolor=colour.get(c.get("verdict"), "#eeeeee") if here
                                       else "#eeeeee", edgecolor="black" if c["outcome"] == "flips" else "white",
                                       lw=2.0 if c["outcome"] == "flips" else 1.0))
            text = ((f"{c['ratio']:.2f}" if c.get("ratio") else c.get("verdict") or "") if here else
                    "not measured" if c["outcome"] == "not measured" else "—")
            ax.text(j + 0.5, i + 0.5, text + (" flips" if c["outcome"] == "flips" else ""), ha="center", va="center",
                    fontsize=7)
    ax.set_xlim(0, len(columns))
    ax.set_ylim(len(rows), 0)
    ax.set_xticks([j + 0.5 for j in range(len(columns))], columns, fontsize=7, rotation=20)
    ax.set_yticks([i + 0.5 for i in range(len(rows))], [r["row"] for r in rows], fontsize=7)
    ax.set_title("JAX/PyTorch with one knob changed\n(colour: verdict; blue JAX faster, red PyTorch faster, green "
                 "tie; black border: flips)", fontsize=8)
    fig.tight_layout()
    return to_png(fig)
