"""Training-study outputs: benchmark_results.csv, training_curves.png, summary tables.

The summary separates what the seeds' table mixed up: the first epoch (with its compile
time shown apart), the steady-state epoch (median and IQR over epochs 2..N), the data
movement inside an epoch, and the accuracies; a second table shows how closely the two
frameworks' loss curves agree, epoch by epoch.
"""

from __future__ import annotations

import csv
import io
import statistics
from collections import OrderedDict
from pathlib import Path
from typing import Any, Iterable, Mapping

from rich.console import Group
from rich.table import Table
from rich.text import Text

from stackwars.stats import CONTENTION_THRESHOLD as THRESHOLD
from stackwars.report import format as fmt

CSV_COLUMNS = ("framework", "backend", "batch_size", "epoch", "epoch_s", "includes_compile", "compile_s",
               "compute_s", "data_s", "initial_transfer_s", "steps", "samples", "train_loss", "train_acc",
               "val_loss", "val_acc", "eval_s", "test_loss", "test_acc", "lr", "placement", "device",
               "split_digest", "contention", "contended", "status", "error")


def to_csv(rows: Iterable[Mapping[str, Any]]) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=CSV_COLUMNS, extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: "" if r.get(k) is None else r[k] for k in CSV_COLUMNS})
    return buf.getvalue()


def _runs(rows: Iterable[Mapping[str, Any]]) -> "OrderedDict[tuple[str, int], list[Mapping[str, Any]]]":
    out: OrderedDict[tuple[str, int], list[Mapping[str, Any]]] = OrderedDict()
    for r in rows:
        out.setdefault((r["backend"], r["batch_size"]), []).append(r)
    return out


def plot(rows: list[Mapping[str, Any]], path: Path, title: str) -> bool:
    """Write the curves of the trainings that finished ok; False (nothing written) if none did."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ok = [r for r in rows if r["status"] == "ok"]
    batches = sorted({r["batch_size"] for r in ok})
    if not batches:
        return False
    fig, axes = plt.subplots(2, len(batches), figsize=(4.2 * len(batches), 7), squeeze=False, sharex=True)
    colours = {"torch-eager": "tab:red", "torch-compile": "tab:orange", "jax-jit": "tab:blue"}
    for col, b in enumerate(batches):
        for (backend, batch), rs in _runs(ok).items():
            if batch != b:
                continue
            ep = [r["epoch"] for r in rs]
            c = colours.get(backend, "tab:gray")
            # PyTorch thick and translucent, JAX thin on top: where the frameworks agree the
            # thin line runs inside the thick one, and both stay visible
            style = {"lw": 4.5, "alpha": 0.35} if backend.startswith("torch") else {"lw": 1.2, "alpha": 1.0}
            for row, (metric, label) in enumerate((("loss", "loss"), ("acc", "accuracy"))):
                ax = axes[row][col]
                ax.plot(ep, [r[f"train_{metric}"] for r in rs], ls="--", color=c, label=f"{backend} train", **style)
                ax.plot(ep, [r[f"val_{metric}"] for r in rs], ls="-", color=c, label=f"{backend} validation",
                        **style)
                ax.set_ylabel(label)
                ax.grid(alpha=0.3)
        axes[0][col].set_title(f"batch {b}")
        axes[1][col].set_xlabel("epoch")
    axes[0][0].legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def summary(rows: list[Mapping[str, Any]], title: str) -> Group:
    table = Table(title=title, title_justify="left")
    for c in ("backend", "batch", "first epoch", "of which compile", "steady epoch (median ± IQR)",
              "data in epoch", "final train loss", "final val acc", "test acc", "status"):
        table.add_column(c, justify="left" if c in ("backend", "status") else "right")
    for (backend, b), rs in _runs(rows).items():
        if rs[0]["status"] not in ("ok", "diverged"):
            table.add_row(backend, str(b), *[fmt.DASH] * 7, Text(rs[0]["status"], style="red"))
            continue
        status = Text(rs[0]["status"], style="green" if rs[0]["status"] == "ok" else "bold red")
        contended = [r["epoch"] for r in rs if r.get("contended")]
        if contended:  # other processes took over 5% of the CPUs while these epochs ran
            status.append(f" (contended: epoch {', '.join(map(str, contended))})", style="yellow")
        steady = [r["epoch_s"] for r in rs[1:]]
        if len(steady) >= 2:
            q = statistics.quantiles(steady, n=4)
            steady_txt = f"{fmt.seconds(statistics.median(steady))} ± {fmt.seconds(q[2] - q[0])}"
        else:
            steady_txt = fmt.seconds(steady[0]) if steady else fmt.DASH
        last = rs[-1]
        table.add_row(backend, str(b), fmt.seconds(rs[0]["epoch_s"]), fmt.seconds(rs[0]["compile_s"]),
                      steady_txt, fmt.seconds(statistics.median(r["data_s"] for r in (rs[1:] or rs))),
                      f"{last['train_loss']:.4f}", f"{100 * last['val_acc']:.2f}%",
                      f"{100 * last['test_acc']:.2f}%" if last.get("test_acc") is not None else fmt.DASH,
                      status)
    parts: list[Any] = [table]
    gaps = loss_gaps(rows)
    if gaps:
        gt = Table(title="do the two frameworks train the same model? loss gap, torch vs jax",
                   title_justify="left")
        for c in ("batch", "epoch-1 train loss (torch / jax)", "max rel. gap train loss", "max rel. gap val loss",
                  "final val acc (torch / jax)"):
            gt.add_column(c, justify="right")
        for g in gaps:
            gt.add_row(str(g["batch_size"]), f"{g['first_torch']:.5f} / {g['first_jax']:.5f}",
                       f"{g['train_gap']:.1e}", f"{g['val_gap']:.1e}",
                       f"{100 * g['acc_torch']:.2f}% / {100 * g['acc_jax']:.2f}%")
        parts.append(gt)
    parts.append(Text("first epoch: wall time of epoch 1's training loop, compilation included (shown apart); "
                      "steady epoch: epochs 2..N; data in epoch: the on-device shuffle (placement=device) or "
                      "the per-batch host-to-device copies (placement=host), median over the steady epochs (epoch 1 alone "
                      "where there is no other; a compiled shuffle's compile is the first epoch's compile); evaluation "
                      "is timed apart and not included; diverged: the loss became NaN, infinite or over 100x "
                      f"chance (100 ln 10) and the training stopped; (contended): other processes took over {THRESHOLD:.0%} of the CPUs during those "
                      "epochs.", style="dim"))
    return Group(*parts)


def loss_gaps(rows: list[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per batch size with both frameworks: the largest relative gap between their losses."""
    by = _runs([r for r in rows if r["status"] == "ok"])
    out = []
    for b in sorted({b for _, b in by}):
        torch_rs = by.get(("torch-eager", b)) or by.get(("torch-compile", b))
        jax_rs = by.get(("jax-jit", b))
        if not torch_rs or not jax_rs:
            continue

        def gap(key: str) -> float:
            return max(abs(t[key] - j[key]) / max(abs(j[key]), 1e-12) for t, j in zip(torch_rs, jax_rs))

        out.append({"batch_size": b, "train_gap": gap("train_loss"), "val_gap": gap("val_loss"),
                    "first_torch": torch_rs[0]["train_loss"], "first_jax": jax_rs[0]["train_loss"],
                    "acc_torch": torch_rs[-1]["val_acc"], "acc_jax": jax_rs[-1]["val_acc"]})
    return out
