"""Scaling study (S1, S2): data-parallel training in JAX and PyTorch over 1, 2, 4... devices.

    stackwars study scaling gpt2 --preset tiny --devices 1,2,4 --strategy dp --strategy fsdp

A cell is (framework, strategy, device count, strong or weak scaling): one train step
(forward, loss, gradients, synchronised gradients, AdamW update) measured in a fresh worker
(JAX: one process, N devices, or one process per host joined by ``jax.distributed``) or in
N processes launched by ``torchrun`` (PyTorch: gloo on the CPU, NCCL on CUDA). Each cell
records: its first step (trace + compile + run), its steady steps (the slowest rank's time
per step, every rank synchronised; raw samples), throughput, scaling efficiency against
N = 1, per-device memory (measured, beside the analytical replicated and sharded state),
the collectives a step issues (counted in JAX's compiled HLO; in PyTorch, the c10d
operators a profiled step issued), and parity: the N-device step's updated parameters and
Adam first moments (0.1 x the averaged gradient) against the same framework's single-device
step on the whole global batch, from the same state.

On a CPU, N "devices" share the machine's cores (JAX's simulated host devices, N torch
processes): the study verifies correctness, memory per device and communication volume
there, and says that its times cannot show a speed-up. Speed-up is a GPU figure.
"""

from __future__ import annotations

import math
import statistics
import time
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from stackwars.errors import SpecError

FRAMEWORKS = ("jax", "torch")
STRATEGIES = ("dp", "fsdp", "shard_map", "pmap")
SCALINGS = ("strong", "weak")
LABELS = {
    ("jax", "dp"): "jax.jit + NamedSharding (batch sharded, state replicated)",
    ("jax", "fsdp"): "jax.jit + NamedSharding (params and optimizer state sharded)",
    ("jax", "shard_map"): "jax.shard_map + lax.pmean of gradients",
    ("jax", "pmap"): "jax.pmap + lax.pmean of gradients",
    ("torch", "dp"): "DistributedDataParallel",
    ("torch", "fsdp"): "FSDP2 (fully_shard per block and the root)",
}
NO_TORCH = {"shard_map": "PyTorch has no shard_map; its explicit per-device program with an all-reduce of "
                         "gradients is DistributedDataParallel (strategy dp)",
            "pmap": "PyTorch has no pmap; its one-process-per-device data parallelism is DDP (strategy dp)"}


def plan(model: str, preset: str, devices: Sequence[int], strategies: Sequence[str], frameworks: Sequence[str],
         scalings: Sequence[str], per_device_batch: int | None, hosts: int = 1) -> list[dict[str, Any]]:
    """The cells, N = 1 first (efficiency is measured against it). Strong scaling splits the
    global batch per_device x max(N) over N devices; weak scaling gives each device
    per_device examples."""
    from stackwars.studies.scaling import models

    from stackwars.parse import one_of

    models.check(model, preset)
    one_of(strategies, STRATEGIES, "strategy")
    one_of(frameworks, FRAMEWORKS, "framework")
    one_of(scalings, SCALINGS, "scaling")
    if hosts < 1 or any(n % hosts for n in devices):
        raise SpecError(f"--hosts {hosts}: every device count must be a multiple of the host count, got "
                        f"{', '.join(map(str, devices))}")
    per = per_device_batch or models.default_batch(model, preset)
    if per < 1:
        raise SpecError(f"--per-device-batch must be positive, got {per}")
    if "strong" in scalings:  # one global batch, split evenly on every device count
        uneven = [n for n in devices if (per * max(devices)) % n]
        if uneven:
            raise SpecError(f"strong scaling splits a global batch of {per * max(devices)} (per-device batch x "
                            f"{max(devices)}) evenly, which {', '.join(map(str, uneven))} device(s) cannot; give "
                            f"device counts that divide {max(devices)}, or --scaling weak")
    items = []
    for scaling in scalings:
        for framework in frameworks:
            for strategy in strategies:
                for n in sorted(devices):
                    if n < hosts:
                        continue
                    global_batch = per * max(devices) if scaling == "strong" else per * n
                    items.append({"model": model, "preset": preset, "framework": framework, "strategy": strategy,
                                  "devices": n, "hosts": hosts, "scaling": scaling, "global_batch": global_batch,
                                  "per_device_batch": global_batch // n})
    return items


def timed_steps(call: Callable[[], Any], sync: Callable[[Any], Any], warmup: int, steps: int,
                before: Callable[[], Any] | None = None, clock: Callable[[], float] = time.perf_counter) -> list[float]:
    """``warmup`` untimed steps, then ``steps`` steps each timed alone: ``before`` (a barrier)
    outside the clock, the step, and the synchronisation on its whole output inside it."""
    for _ in range(warmup):
        sync(call())
    samples = []
    for _ in range(steps):
        if before is not None:
            before()
        t0 = clock()
        out = call()
        sync(out)
        samples.append(clock() - t0)
        out = None  # released before the next step, as a training loop would
    return samples


def gather_samples(samples: Sequence[float], allgather: Callable[[np.ndarray], np.ndarray] | None
                   ) -> list[dict[str, Any]]:
    """Every rank's samples (row r = rank r) from ``allgather`` of this rank's, or only ours."""
    table = np.atleast_2d(allgather(np.asarray(samples)) if allgather else np.asarray(samples))
    return [{"rank": r, "step_samples_s": [float(v) for v in row]} for r, row in enumerate(table)]


def slowest(per_rank: Sequence[Mapping[str, Any]]) -> list[float]:
    """Per step, the slowest rank's time: the step is done when the last rank is."""
    return [float(v) for v in np.max(np.array([r["step_samples_s"] for r in per_rank]), axis=0)]


def parity(params: Mapping[str, np.ndarray], ref_params: Mapping[str, np.ndarray], mu: Mapping[str, np.ndarray],
           ref_mu: Mapping[str, np.ndarray], tolerance: float) -> dict[str, Any]:
    """The N-device step against the one-device step, after one AdamW step from the same state.

    First moments (``mu`` = 0.1 x the averaged gradient): max |a - b| / max |b| per tensor, the
    worst over tensors; a tensor whose reference is below 1e-3 of the largest is scaled by that
    floor, so a gradient that is rounding noise (GPT-2's key bias: softmax ignores it) cannot
    fail the check on its own.

    Updated parameters: the same measure, over the elements whose gradient is above rounding:
    Adam's first update is lr x g / (|g| + eps), which flips by 2 lr when a gradient that is
    zero up to rounding changes sign with the order of a sum. Elements below 1e-3 of their
    tensor's largest first moment (and below 1e-6 of the largest of all) are left out of the
    parameter comparison, and counted; their first moments are still compared."""
    names = sorted(set(mu) & set(ref_mu))
    if not names or len(names) != len(ref_mu) or set(params) != set(ref_params) or set(names) != set(ref_params):
        raise ValueError(f"parity: the two sides name different tensors ({len(mu)} vs {len(ref_mu)}, "
                         f"{len(names)} in common)")
    top = max(float(np.max(np.abs(ref_mu[k]))) for k in names)

    def rel(a, b, keep=None):
        d = np.abs(a - b)
        if keep is not None:
            d, b = d[keep], b[keep]
        if d.size == 0:
            return 0.0
        return float(np.max(d)) / max(float(np.max(np.abs(b))), 1e-30)

    g_errs, p_errs, left_out = {}, {}, 0
    for k in names:
        m = np.abs(ref_mu[k])
        g_errs[k] = float(np.max(np.abs(mu[k] - ref_mu[k]))) / max(float(np.max(m)), 1e-3 * top, 1e-30)
        keep = m >= max(1e-3 * float(np.max(m)), 1e-6 * top)
        left_out += int(keep.size - np.count_nonzero(keep))
        p_errs[k] = rel(np.asarray(params[k]), np.asarray(ref_params[k]), keep)
    g_name, p_name = max(g_errs, key=g_errs.get), max(p_errs, key=p_errs.get)
    return {"params_rel_err": p_errs[p_name], "params_worst": p_name, "params_left_out": left_out,
            "grads_rel_err": g_errs[g_name], "grads_worst": g_name, "tolerance": tolerance,
            "ok": bool(p_errs[p_name] <= tolerance and g_errs[g_name] <= tolerance),
            "against": "the same framework's single-device step on the global batch"}


def analytic_state_bytes(parameters: int, devices: int) -> dict[str, int]:
    """What a device keeps between steps, float32: the parameters and AdamW's two moments, 12
    bytes per parameter, on every device when replicated, a 1/N share when sharded (ZeRO-3 /
    FSDP). Gradients (4 more bytes per parameter, or 1/N sharded) and the parameters a sharded
    layer gathers while it runs live only during the step, in the peak."""
    whole = 12 * parameters
    return {"replicated": whole, "sharded": math.ceil(whole / devices)}


def row(item: Mapping[str, Any], result: Mapping[str, Any] | None, status: str, error: str | None,
        parameters: int | None, tokens_per_example: int) -> dict[str, Any]:
    r: dict[str, Any] = {k: item[k] for k in ("model", "preset", "framework", "strategy", "devices", "hosts",
                                              "scaling", "global_batch", "per_device_batch")}
    r.update(backend=f"{item['framework']}-{item['strategy']}", variant=f"{item['scaling']}/{item['devices']}",
             label=LABELS.get((item["framework"], item["strategy"]), item["strategy"]), status=status,
             error=(error or "").strip()[:2000] or None, parameters=parameters)
    res = dict(result or {})
    samples = res.get("step_samples_s") or []
    med = statistics.median(samples) if samples else None
    q = np.percentile(samples, [25, 75]) if samples else None
    state = analytic_state_bytes(parameters, item["devices"]) if parameters else {}
    r.update(first_step_s=res.get("first_step_s"), compile_s=res.get("compile_s"), trace_s=res.get("trace_s"),
             step_median_s=med, step_iqr_s=float(q[1] - q[0]) if q is not None else None,
             step_samples_s=list(samples), steps=len(samples),
             samples_per_s=item["global_batch"] / med if med else None,
             tokens_per_s=item["global_batch"] * tokens_per_example / med if med else None,
             state_bytes_per_device=res.get("state_bytes_per_device"),
             analytic_replicated_bytes=state.get("replicated"), analytic_sharded_bytes=state.get("sharded"),
             peak_bytes_per_device=res.get("peak_device_bytes"), peak_counter=res.get("peak_counter"),
             memory_plan=res.get("memory_plan"), collectives=res.get("collectives") or {},
             comm_bytes=sum(c.get("bytes", 0) for c in (res.get("collectives") or {}).values()) or None,
             comm_source=res.get("comm_source"), per_rank=res.get("per_rank"),
             parity=res.get("parity"), threads=res.get("threads"), device_kind=res.get("device_kind"),
             framework_version=res.get("framework_version"), implementation=res.get("implementation"),
             matmul_precision=res.get("matmul_precision"),
             process_count=res.get("process_count"), teardown_error=res.get("teardown_error"))
    return r


def efficiency(rows: Sequence[dict[str, Any]]) -> None:
    """Scaling efficiency against the same framework, strategy and scaling at N = 1: strong
    t1 / (N tN), weak t1 / tN. In place; None where either side has no time."""
    base = {(r["framework"], r["strategy"], r["scaling"]): r["step_median_s"] for r in rows
            if r["devices"] == 1 and r["status"] == "ok" and r["step_median_s"]}
    for r in rows:
        t1 = base.get((r["framework"], r["strategy"], r["scaling"]))
        tn = r["step_median_s"] if r["status"] == "ok" else None
        if t1 and tn:
            # throughput against one device: the same batch (strong) or N times it (weak)
            r["speedup"] = t1 / tn * (r["devices"] if r["scaling"] == "weak" else 1)
            r["efficiency"] = r["speedup"] / r["devices"]
        else:
            r["speedup"] = r["efficiency"] = None


def findings(rows: Sequence[Mapping[str, Any]], simulated: bool, cores: int | None) -> list[str]:
    from stackwars.report import format as fmt

    notes = []
    if simulated:
        notes.append(f"the devices are simulated on a CPU with {cores} core(s): every device shares them, so these "
                     f"times say nothing of a speed-up on real devices; what holds here is parity, memory per "
                     f"device and the communication each step issues")
    ok = [r for r in rows if r["status"] in ("ok", "parity_fail")]
    grouped: dict[tuple, list[str]] = {}
    for r in rows:
        if r["status"] == "ok":
            continue
        why = (r.get("error") or "").splitlines()[0][:200] if r.get("error") else ""
        if r["status"] == "parity_fail":
            p = r.get("parity") or {}
            why = (f"updated parameters {p.get('params_rel_err', float('nan')):.1e}, first moments "
                   f"{p.get('grads_rel_err', float('nan')):.1e} against a tolerance of {p.get('tolerance')}")
        grouped.setdefault((r["framework"], r["strategy"], r["status"], why), []).append(
            f"N={r['devices']} {r['scaling']}")
    for (fw, strategy, status, why), where in grouped.items():
        notes.append(f"{fw} {strategy}: {status} ({', '.join(where)})" + (f": {why}" if why else ""))
    for r in rows:
        if r.get("teardown_error"):
            notes.append(f"{r['framework']} {r['strategy']} N={r['devices']} {r['scaling']}: a process died after "
                         f"every rank's figures were gathered and written ({r['teardown_error'].splitlines()[0]}); "
                         f"the measurement stands")
    good = [r for r in ok if r["status"] == "ok" and r.get("parity")]
    if good:
        worst = max(good, key=lambda r: max(r["parity"]["params_rel_err"], r["parity"]["grads_rel_err"]))
        p = worst["parity"]
        notes.append(f"parity: every N-device step that ran matches its framework's single-device step "
                     f"({len(good)} cells; worst {worst['framework']} {worst['strategy']} N={worst['devices']}: "
                     f"parameters {p['params_rel_err']:.1e}, first moments {p['grads_rel_err']:.1e}, "
                     f"tolerance {p['tolerance']:g})")
    for fw in FRAMEWORKS:
        pairs = {}
        for r in good:
            if r["framework"] == fw and r["strategy"] in ("dp", "fsdp") and r["state_bytes_per_device"]:
                pairs.setdefault((r["devices"], r["scaling"]), {})[r["strategy"]] = r
        for (n, scaling), by in sorted(pairs.items()):
            if n > 1 and "dp" in by and "fsdp" in by and scaling == "strong":
                a, b = by["dp"]["state_bytes_per_device"], by["fsdp"]["state_bytes_per_device"]
                notes.append(f"{fw}, {n} devices: sharding holds {fmt.nbytes(b)} of parameters and optimizer state "
                             f"per device against {fmt.nbytes(a)} replicated ({a / b:.1f}x less)")
        seen = set()
        for r in sorted(good, key=lambda r: r["devices"]):
            if r["framework"] != fw or r["devices"] < 2 or r["scaling"] != "strong" or not r["collectives"]:
                continue
            kinds = ", ".join(f"{k} x{v['count']} ({fmt.nbytes(v['bytes'])})"
                              for k, v in sorted(r["collectives"].items()))
            if (r["strategy"], kinds) in seen:  # the same program at another N: said once
                continue
            seen.add((r["strategy"], kinds))
            note = f"{fw} {r['strategy']} N={r['devices']}: a step issues {kinds}"
            c = r["collectives"]
            if fw == "jax" and r["strategy"] == "fsdp" and "reduce-scatter" not in c:
                grads = 4 * (r.get("parameters") or 0)
                if c.get("all-reduce", {}).get("bytes", 0) >= grads:
                    note += (f"; no reduce-scatter: the gradients ({fmt.nbytes(grads)}) are all-reduced whole and "
                             f"each device keeps its shard")
                else:
                    note += (f"; neither FSDP's reduce-scatter nor a whole-gradient all-reduce "
                             f"({fmt.nbytes(grads)}): XLA's partitioner chose its own communication for these "
                             f"shardings (they say where arrays live, not what moves)")
            notes.append(note)
    dp = {(r["framework"], r["devices"]): r for r in good if r["strategy"] == "dp" and r["scaling"] == "strong"
          and r["devices"] > 1 and r.get("comm_bytes")}
    for (fw, n), r in sorted(dp.items()):
        other = dp.get(("torch", n)) if fw == "jax" else None
        if other and abs(other["comm_bytes"] - r["comm_bytes"]) > 0.01 * other["comm_bytes"]:
            notes.append(f"data parallel on {n} devices: JAX's partitioner all-reduces {fmt.nbytes(r['comm_bytes'])} "
                         f"per step, DDP {fmt.nbytes(other['comm_bytes'])} (the gradients: "
                         f"{fmt.nbytes(4 * r['parameters'])} in float32)")
    if not simulated:
        for r in good:
            if r.get("efficiency") is not None and r["devices"] > 1:
                notes.append(f"{r['framework']} {r['strategy']} {r['scaling']} N={r['devices']}: "
                             f"{r['speedup']:.2f}x the one-device throughput, efficiency {r['efficiency']:.0%}")
    return notes
