"""One rank of a PyTorch cell of the scaling study, as torchrun starts it:

    torchrun --nproc-per-node N -m stackwars.studies.scaling.torch_rank ITEM.json RESULT.json

(or ``srun``/``torchrun --nnodes`` on several hosts: the process group comes from the
environment torchrun or the cluster sets, RANK / WORLD_SIZE / MASTER_ADDR / MASTER_PORT).

Strategies: ``dp`` = ``DistributedDataParallel``; ``fsdp`` = FSDP2, ``fully_shard`` on each
transformer block (each linear layer of the MLP) and on the root, as PyTorch's FSDP2 examples
wrap a model. Each rank trains on its slice of the global batch; the loss is the slice's mean,
and both wrappers average the gradients over ranks, so the step is the one-device step on the
whole batch. Rank 0 writes the cell's result, with every rank's figures in it.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from typing import Any

from stackwars.harness.worker import write_atomic

COLLECTIVE_OPS = {  # c10d operator (profiler event) -> the collective, and which argument is its result
    "c10d::allreduce_": ("all-reduce", 0), "c10d::allreduce_coalesced_": ("all-reduce", 0),
    "c10d::_allgather_base_": ("all-gather", 0), "c10d::allgather_": ("all-gather", 0),
    "c10d::allgather_into_tensor_coalesced_": ("all-gather", 0),
    "c10d::_reduce_scatter_base_": ("reduce-scatter", 0), "c10d::reduce_scatter_": ("reduce-scatter", 0),
    "c10d::reduce_scatter_tensor_coalesced_": ("reduce-scatter", 0),
    "c10d::broadcast_": ("collective-broadcast", 0), "c10d::alltoall_base_": ("all-to-all", 0),
}


def _numel(shape: Any) -> int:
    """Elements of an argument's recorded shape, or of a list of tensors' shapes."""
    if not shape:
        return 0
    if isinstance(shape[0], (list, tuple)):
        return sum(_numel(s) for s in shape)
    n = 1
    for d in shape:
        n *= int(d)
    return n


DTYPE_BYTES = {"float": 4, "double": 8, "c10::BFloat16": 2, "c10::Half": 2, "int": 4, "long int": 8,
               "unsigned char": 1, "signed char": 1, "bool": 1}


def collectives_of(events: Any, itemsize: int) -> dict[str, dict[str, int]]:
    """Per kind, how many c10d collectives a profiled step issued and their result bytes (a
    tensor list's element type is not recorded: ``itemsize``, the parameters', stands in)."""
    out: dict[str, dict[str, int]] = {}
    for e in events:
        kind = COLLECTIVE_OPS.get(e.name)
        if kind is None:
            continue
        shapes = list(getattr(e, "structured_input_shapes", None) or getattr(e, "input_shapes", None) or [])
        dtypes = list(getattr(e, "input_dtypes", None) or [])
        size = DTYPE_BYTES.get(dtypes[kind[1]], itemsize) if len(dtypes) > kind[1] else itemsize
        entry = out.setdefault(kind[0], {"count": 0, "bytes": 0})
        entry["count"] += 1
        entry["bytes"] += _numel(shapes[kind[1]]) * size if len(shapes) > kind[1] else 0
    return out


def _full(t):
    """A parameter or optimizer state whole, on every rank (a DTensor is gathered)."""
    return t.full_tensor() if hasattr(t, "full_tensor") else t


def _local_bytes(t) -> int:
    t = t.to_local() if hasattr(t, "to_local") else t
    return t.numel() * t.element_size()


def init_group(device_kind: str):
    """Join the process group the environment describes (torchrun, or a cluster's launcher
    exporting RANK / WORLD_SIZE / MASTER_ADDR / MASTER_PORT / LOCAL_RANK); this rank's device."""
    import torch
    import torch.distributed as dist

    for var in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        if var not in os.environ:
            raise RuntimeError(f"{var} is not set: start this under torchrun (or a launcher that sets RANK, "
                               f"WORLD_SIZE, MASTER_ADDR, MASTER_PORT, LOCAL_RANK)")
    cuda = device_kind == "cuda"
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    device = torch.device(f"cuda:{local_rank}") if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    if not dist.is_initialized():
        dist.init_process_group("nccl" if cuda else "gloo", **({"device_id": device} if cuda else {}))
    return device


def run_item(item: dict[str, Any], result_path: str, device) -> None:
    """One cell on the joined group; rank 0 writes the result (an error result if this fails)."""
    import torch
    import torch.distributed as dist

    torch.set_num_threads(int(item.get("threads_per_rank") or torch.get_num_threads()))
    torch.set_float32_matmul_precision("highest")  # as JAX is set: exact float32, no TF32
    rank, world = dist.get_rank(), dist.get_world_size()
    try:
        if world != item["devices"]:
            raise RuntimeError(f"the process group has {world} ranks, the cell asks for {item['devices']}")
        _run(item, result_path, rank, world, device)
    except BaseException as exc:
        if rank == 0:
            import traceback
            from stackwars.harness.worker import classify
            write_atomic(result_path, {"status": classify(exc), "error": f"{type(exc).__name__}: {exc}\n\n"
                                                                  f"{traceback.format_exc()}"})
        raise


def end_process(code: int) -> None:
    """End a rank's process with ``code``, its work done and its group destroyed, without the
    interpreter's teardown. ``destroy_process_group`` does not stop a gloo group's threads where
    FSDP2 ran: its device mesh, kept by DTensor's caches, still holds the group (two pt_gloo_runloop
    threads and gloo_tcp_loop were alive at the last exit handler of both ranks). The teardown then
    destroyed it among everything else, and once in about forty suite runs aborted rank 1 after the
    result was written ("terminate called without an active exception"; torchrun failed the job).
    What Python does before its teardown is still done, in its order: other threads awaited, the exit
    handlers run (temporary folders, logging), the output flushed."""
    import atexit
    import threading

    for thread in threading.enumerate():
        if thread is not threading.current_thread() and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed or broken pipe: nothing more to say
            pass
    os._exit(code)


def main(item_path: str, result_path: str) -> int:
    import torch.distributed as dist

    with open(item_path) as f:
        item = json.load(f)
    device = init_group(item["device"])
    try:
        run_item(item, result_path, device)
    finally:
        dist.destroy_process_group()
    return 0


def _run(item, result_path, rank, world, device) -> None:
    import torch
    import torch.distributed as dist
    from torch.distributed.fsdp import fully_shard
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch.profiler import ProfilerActivity, profile

    from stackwars.backends.torch_common import make_optimizer
    from stackwars.harness.memory import read_hwm
    from stackwars.harness.memory import current_rss
    from stackwars.studies import scaling
    from stackwars.studies.scaling import models

    cuda = device.type == "cuda"
    pb = models.problem(item["model"], item["preset"], item["global_batch"], item.get("seed", 0), item["device"])
    per = pb.global_batch // world
    model, loss_fn, tensors = models.torch_model(pb, device)
    mine = tensors({k: v[rank * per:(rank + 1) * per] for k, v in pb.batch.items()})
    rss0 = current_rss()
    if item["strategy"] == "dp":
        wrapped = DDP(model, device_ids=[device.index] if cuda else None)
        inner = wrapped.module
    elif item["strategy"] == "fsdp":
        units = list(model.blocks) if hasattr(model, "blocks") else [m for m in model.modules()
                                                                       if isinstance(m, torch.nn.Linear)]
        for unit in units:
            fully_shard(unit)
        wrapped = inner = fully_shard(model)
    else:
        raise ValueError(scaling.NO_TORCH.get(item["strategy"], item["strategy"]))
    opt = make_optimizer(models.OPTIMIZER, wrapped.parameters())

    def step():
        value = loss_fn(wrapped, mine)
        value.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return value

    def sync(_):
        if cuda:
            torch.cuda.synchronize(device)

    dist.barrier()
    t0 = time.perf_counter()
    first = step()
    sync(first)
    first_s = time.perf_counter() - t0
    named = dict(inner.named_parameters())
    first_params = models.torch_canonical(pb, {k: _full(p) for k, p in named.items()})
    first_mu = models.torch_canonical(pb, {k: _full(opt.state[p]["exp_avg"]) for k, p in named.items()})
    total = first.detach().clone()
    dist.all_reduce(total)  # the global batch's mean loss: the mean of the ranks' equal slices
    first_loss = float(total) / world
    first_all = [None] * world
    dist.all_gather_object(first_all, first_s)

    # no reset after the first step: JAX's allocator cannot reset its peak, so both frameworks'
    # peaks cover the worker's whole life, first step included
    mine_samples = scaling.timed_steps(step, sync, item["warmup"], item["steps"], before=dist.barrier)
    peak = torch.cuda.max_memory_allocated(device) if cuda else (read_hwm() or current_rss()) - rss0
    state_bytes = sum(_local_bytes(p) for p in wrapped.parameters()) + sum(
        _local_bytes(v) for s in opt.state.values() for v in s.values() if torch.is_tensor(v))

    # one more step under the profiler, after the timed ones: what it issues, never what it costs
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=activities, record_shapes=True) as prof:
        sync(step())
    comm = collectives_of(prof.events(), 4)

    mine_info = {"rank": rank, "host": socket.gethostname(), "node_rank": int(os.environ.get("GROUP_RANK", 0)),
                 "step_samples_s": mine_samples, "first_step_s": first_s, "peak_bytes": int(peak),
                 "state_bytes": int(state_bytes), "collectives": comm}
    everyone = [None] * world
    dist.all_gather_object(everyone, mine_info)
    if rank == 0:
        ref_model, _, _ = models.torch_model(pb, device)  # the one-device step on the whole batch
        ref_opt = make_optimizer(models.OPTIMIZER, ref_model.parameters())
        ref_value = loss_fn(ref_model, tensors(pb.batch))
        ref_value.backward()
        ref_loss = float(ref_value.detach())
        ref_opt.step()
        ref_named = dict(ref_model.named_parameters())
        result_parity = scaling.parity(first_params, models.torch_canonical(pb, ref_named), first_mu,
                                       models.torch_canonical(pb, {k: ref_opt.state[p]["exp_avg"]
                                                                   for k, p in ref_named.items()}), pb.tolerance)
        result_parity["loss_rel_err"] = abs(first_loss - ref_loss) / max(abs(ref_loss), 1e-30)
        write_atomic(result_path, {
            "status": "ok" if result_parity["ok"] else "parity_fail", "complete": True, "hosts": item.get("hosts", 1),
            "process_count": world, "first_step_s": max(first_all), "step_samples_s": scaling.slowest(everyone),
            "per_rank": everyone, "collectives": comm, "comm_source": "c10d operators of one profiled step (rank 0)",
            "state_bytes_per_device": int(state_bytes), "peak_device_bytes": int(max(r["peak_bytes"] for r in everyone)),
            "peak_counter": ("torch.cuda.max_memory_allocated, since the rank started (first step included, as JAX's peak)" if cuda else
                             "VmHWM - RSS before wrapping (process), the largest rank"),
            "parity": result_parity, "threads": torch.get_num_threads(),
            "device_kind": torch.cuda.get_device_name(device) if cuda else "cpu",
            "framework_version": torch.__version__, "implementation": scaling.LABELS[("torch", item["strategy"])],
            "matmul_precision": "highest (float32)"})
    dist.barrier()


if __name__ == "__main__":
    try:
        status = main(sys.argv[1], sys.argv[2])
    except BaseException:  # noqa: BLE001 - said as Python would, then ended as every rank is
        import traceback
        traceback.print_exc()
        status = 1
    end_process(status)
