"""One JAX cell of the scaling study: a data-parallel train step over N devices.

Runs in a worker process of its own, because the number of CPU devices is fixed when JAX
starts (``jax_num_cpu_devices``), and, for several hosts, in one process per host joined by
``jax.distributed.initialize`` (the coordinator address, process count and id come with the
item, or, launched by someone else, from JAX's own cluster detection: SLURM, Open MPI...).

Strategies, each at the ``jit`` boundary as JAX's documentation writes them:

* ``dp``: ``jax.jit`` with ``NamedSharding``: the batch sharded over the mesh's ``data``
  axis, parameters and optimizer state replicated; XLA's SPMD partitioner inserts the
  gradient all-reduce;
* ``fsdp``: the same, with every parameter and optimizer-state array sharded over ``data``
  along its first axis that divides by N (arrays that none divides stay replicated): XLA
  gathers parameters where they are used and reduces the gradients onto their shards;
* ``shard_map``: the per-device program written by hand, gradients averaged by an explicit
  ``jax.lax.pmean``;
* ``pmap``: the same per-device program under ``jax.pmap`` (where this JAX still has it).
"""

from __future__ import annotations

import time
from typing import Any, Mapping

import numpy as np


_STARTED: dict[str, Any] = {}


def _start(item: Mapping[str, Any]) -> dict[str, Any]:
    """Configure JAX's devices before anything touches them; join the other hosts. Once per
    process: a process given several cells (``--launcher external``) joins once."""
    import jax

    if not _STARTED:
        # float32 matmuls exact in both frameworks: JAX's default on GPUs is TF32, PyTorch's is not
        jax.config.update("jax_default_matmul_precision", "highest")
        hosts = int(item.get("hosts", 1))
        local = item["devices"] // hosts
        if item["device"] == "cpu":
            jax.config.update("jax_num_cpu_devices", local)
            if hosts > 1:
                jax.config.update("jax_cpu_collectives_implementation", "gloo")
        if item.get("launcher") == "external" or hosts > 1:
            # given: the coordinator's address, the process count and this process's id; not
            # given (external launch): JAX detects them from the cluster (SLURM, Open MPI, ...)
            jax.distributed.initialize(coordinator_address=item.get("coordinator"),
                                       num_processes=hosts if item.get("coordinator") else None,
                                       process_id=item.get("process_id"))
        _STARTED.update(hosts=jax.process_count(), process_index=jax.process_index(),
                        process_count=jax.process_count())
    return dict(_STARTED)


def _host(x) -> np.ndarray:
    """A (possibly sharded over several processes) array, whole, in this process."""
    if getattr(x, "is_fully_addressable", True):
        return np.asarray(x)
    from jax.experimental import multihost_utils
    return np.asarray(multihost_utils.process_allgather(x, tiled=True))


def _first_axis_sharding(mesh, n: int, x):
    from jax.sharding import NamedSharding, PartitionSpec as P
    for axis, size in enumerate(x.shape):
        if size % n == 0 and size >= n:
            return NamedSharding(mesh, P(*([None] * axis), "data"))
    return NamedSharding(mesh, P())


def _place(x: np.ndarray, sharding):
    """Each process supplies the shards of a global array it holds (one host: all of them)."""
    import jax
    x = np.asarray(x)
    return jax.make_array_from_callback(x.shape, sharding, lambda idx: x[idx])


def run_cell(item: Mapping[str, Any]) -> dict[str, Any]:
    """One cell in named steps: the problem and its devices, the strategy's program, its first
    call in parts, the timed steps (the slowest process's), memory, and parity against the
    one-device step from the same state."""
    started = _start(item)  # first: JAX's devices are fixed before anything touches them
    import jax

    from stackwars.harness.settings import available_cpus
    from stackwars.ir.stats import collectives
    from stackwars.studies import scaling
    from stackwars.studies.scaling import models

    n, strategy = item["devices"], item["strategy"]
    platform = "gpu" if item["device"] == "cuda" else "cpu"
    devices = _devices(jax, platform, n, strategy, started)
    pb = models.problem(item["model"], item["preset"], item["global_batch"], item.get("seed", 0),
                         item["device"])
    local0 = jax.local_devices()[0]
    params, loss, host_batch = models.jax_model(pb, local0)
    batch_np = host_batch(pb.batch)
    step, local_step, tx = _steps(loss)
    params_np = jax.tree.map(np.asarray, params)
    opt_np = jax.tree.map(np.asarray, tx.init(params))
    fn, args = _program(strategy, devices, n, step, local_step, params_np, opt_np, batch_np)
    compiled, state, times, hlo = _first_call(fn, args)

    def unstack(tree):
        return jax.tree.map(lambda x: _host(x)[0] if strategy == "pmap" else _host(x), tree)

    first_params, first_opt = unstack(state[0]), unstack(state[1])
    first_loss = float(np.asarray(unstack(state[2])))

    def call():
        p, o, value = compiled(state[0], state[1], args[2])
        state[0], state[1] = p, o
        return p, o, value

    mine = scaling.timed_steps(call, jax.block_until_ready, item["warmup"], item["steps"])
    per_process = scaling.gather_samples(mine, _allgather(started))
    samples = scaling.slowest(per_process)
    memory = _memory(compiled, state, local0, devices, strategy, platform)
    state = None

    # parity: the single-device step from the same state, on one device, after the timing
    ref = jax.jit(step)
    one = jax.tree.map(lambda x: jax.device_put(x, local0), (params_np, opt_np, batch_np))
    ref_params, ref_opt, ref_loss = ref(*one)
    parity = scaling.parity(models.jax_canonical(pb, first_params), models.jax_canonical(pb, ref_params),
                            models.jax_canonical(pb, _mu(first_opt)), models.jax_canonical(pb, _mu(ref_opt)),
                            pb.tolerance)
    parity["loss_rel_err"] = abs(first_loss - float(ref_loss)) / max(abs(float(ref_loss)), 1e-30)
    return {"status": "ok" if parity["ok"] else "parity_fail", "complete": True, **started,
            **times, "step_samples_s": samples,
            "per_rank": per_process, "collectives": collectives(hlo), **memory,
            "comm_source": "compiled HLO (per device, static count)", "parity": parity,
            "threads": len(available_cpus()),
            "device_kind": devices[0].device_kind, "framework_version": jax.__version__,
            "implementation": scaling.LABELS[("jax", strategy)], "matmul_precision": "highest (float32)"}


def _devices(jax, platform: str, n: int, strategy: str, started: Mapping[str, Any]) -> list:
    """The devices the cell runs on, or why it cannot run here."""
    from stackwars.errors import Unsupported

    devices = jax.devices(platform)
    if len(devices) < n:
        raise Unsupported(f"{n} devices asked for, JAX sees {len(devices)} {platform} device(s)")
    if strategy == "pmap" and not hasattr(jax, "pmap"):
        raise Unsupported(f"jax.pmap is gone from JAX {jax.__version__}")
    if strategy == "pmap" and started["process_count"] > 1:
        raise Unsupported("pmap across processes is not driven by this study; use dp, fsdp or shard_map")
    return devices


def _steps(loss):
    """The whole-batch train step, one device's step on its shard (gradients averaged by an
    explicit pmean), and the optimizer."""
    import jax
    import optax

    from stackwars.backends.jax_common import make_optimizer
    from stackwars.studies.scaling import models

    tx = make_optimizer(models.OPTIMIZER)

    def step(params, opt_state, batch):
        value, grads = jax.value_and_grad(loss)(params, batch)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, value

    def local_step(params, opt_state, batch):  # one device's shard of the batch
        value, grads = jax.value_and_grad(loss)(params, batch)
        grads = jax.lax.pmean(grads, "data")  # the all-reduce DDP does, written out
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, jax.lax.pmean(value, "data")

    return step, local_step, tx


def _program(strategy: str, devices: list, n: int, step, local_step, params_np, opt_np, batch_np):
    """The strategy's program over ``n`` devices, as JAX's documentation writes it, and its
    arguments placed as it wants them."""
    import jax
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

    if strategy not in ("dp", "fsdp", "shard_map"):  # pmap: a leading axis of one slice per device
        def stacked(x):
            return np.broadcast_to(x, (n, *x.shape))
        args = (jax.tree.map(stacked, params_np), jax.tree.map(stacked, opt_np),
                jax.tree.map(lambda x: x.reshape(n, x.shape[0] // n, *x.shape[1:]), batch_np))
        return jax.pmap(local_step, axis_name="data", devices=devices[:n], donate_argnums=(0, 1)), args
    mesh = Mesh(np.array(devices[:n]), ("data",))
    rep, data = NamedSharding(mesh, P()), NamedSharding(mesh, P("data"))
    if strategy == "fsdp":
        pshard = jax.tree.map(lambda x: _first_axis_sharding(mesh, n, x), params_np)
        oshard = jax.tree.map(lambda x: _first_axis_sharding(mesh, n, x), opt_np)
    else:
        pshard = jax.tree.map(lambda _: rep, params_np)
        oshard = jax.tree.map(lambda _: rep, opt_np)
    args = (jax.tree.map(_place, params_np, pshard), jax.tree.map(_place, opt_np, oshard),
            jax.tree.map(lambda x: _place(x, data), batch_np))
    if strategy == "shard_map":
        # check_vma=False: with JAX's varying-axes typing on, the gradient of a replicated
        # parameter comes back already summed over the axis (the transpose of its implicit
        # broadcast), and a pmean on top would scale it by N; off, the per-device gradients
        # are local and the explicit pmean is the one all-reduce, as in pmap
        return jax.jit(jax.shard_map(local_step, mesh=mesh, in_specs=(P(), P(), P("data")),
                                     out_specs=(P(), P(), P()), check_vma=False), donate_argnums=(0, 1)), args
    return jax.jit(step, in_shardings=(pshard, oshard, data), out_shardings=(pshard, oshard, rep),
                   donate_argnums=(0, 1)), args


def _first_call(fn, args):
    """The first call in parts: trace + lower, compile, run (the harness's "first call" is their
    sum); the compiled program, its state after the call, the times and the optimized HLO."""
    import jax

    t0 = time.perf_counter()
    lowered = fn.lower(*args)
    t1 = time.perf_counter()
    compiled = lowered.compile()
    t2 = time.perf_counter()
    state = list(compiled(*args))
    jax.block_until_ready(state)
    t3 = time.perf_counter()
    times = {"trace_s": t1 - t0, "compile_s": t2 - t1, "first_step_s": t3 - t0}
    return compiled, state, times, compiled.as_text() or ""


def _memory(compiled, state, local0, devices: list, strategy: str, platform: str) -> dict[str, Any]:
    """Memory: the live state's shards on this process's first device, and the compiler's plan
    (the peak where the client keeps no allocator statistics)."""
    import jax

    def on_first(tree) -> int:
        total = 0
        for leaf in jax.tree.leaves(tree):
            for shard in leaf.addressable_shards:
                if shard.device == local0 or (strategy == "pmap" and shard.device == devices[0]):
                    total += shard.data.nbytes
        return total

    state_bytes = on_first((state[0], state[1]))
    analysis = compiled.memory_analysis()
    if isinstance(analysis, (list, tuple)):
        analysis = analysis[0] if analysis else None
    plan = None
    if analysis is not None:
        plan = {k: int(getattr(analysis, f"{k}_size_in_bytes", 0) or 0) for k in ("argument", "output", "alias",
                                                                                  "temp")}
    stats = local0.memory_stats() if platform == "gpu" else None
    peak = (stats or {}).get("peak_bytes_in_use")
    counter = "jax memory_stats peak_bytes_in_use" if peak else None
    if peak is None and plan is not None:  # the CPU client keeps no allocator statistics
        peak = plan["argument"] + plan["output"] - plan["alias"] + plan["temp"]
        counter = "XLA's compiled memory plan: arguments + outputs - aliased + temporaries (per device)"
    return {"state_bytes_per_device": state_bytes, "peak_device_bytes": peak, "peak_counter": counter,
            "memory_plan": plan}


def _mu(opt_state):
    """The first moment of optax's Adam state: after one step, (1 - b1) x the gradient."""
    import optax
    return optax.tree_utils.tree_get(opt_state, "mu")


def _allgather(started):
    if started["process_count"] == 1:
        return None
    from jax.experimental import multihost_utils
    return lambda a: np.asarray(multihost_utils.process_allgather(np.asarray(a)))
