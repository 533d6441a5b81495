"""Plots of the studies (PNG, matplotlib's Agg backend: no display needed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence


def _plt():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


STYLE = {"torch-eager": ("tab:red", "--"), "torch-compile": ("tab:orange", "-"),
         "jax-eager": ("tab:cyan", "--"), "jax-jit": ("tab:blue", "-")}


def control_flow(rows: Sequence[Mapping[str, Any]], out_dir: Path) -> list[Path]:
    """One PNG per workload: first call, steady state and memory against n (log-log), a line
    per backend x impl (x remat), forward and train-step in two rows."""
    from stackwars.studies.control_flow import series

    plt = _plt()
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
        fig.tight_layout()
        path = out_dir / f"control-flow-{workload}.png"
        fig.savefig(path, dpi=100)
        plt.close(fig)
        written.append(path)
    return written
