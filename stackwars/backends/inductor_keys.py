"""What Inductor works out once a process, worked out in the fork server of a run's later rounds.

A process of torch.compile whose cell's programs are already in the run's cache (every process
after a cell's first: it is there for its steady state; its first call is no figure, the cold
first process's is) spent 0.8-1.8 s in its first call on the 2-CPU EPYC VM, of which the compile
proper (Dynamo's trace, reading the compiled graphs back) is about half. The rest is Inductor
finding out facts about the installation and the machine that are the same in every process and
that it keeps for the process's life: a hash of its own source files (``torch_key``, the key of
every cache entry: 0.39 s), of Triton's where Triton is installed (``triton_key``: 0.42 s), and
which vector instruction sets the CPU's compiled kernels may use (``valid_vec_isa_list``: a
dry-run compile and a Python child that loads it, 0.48 s).

Imported by a fork server whose cells are later rounds' CPU processes of a compiling backend
(runner/servers.process_request), never by the server of a cell's first process, whose first call
is the figure a user's fresh process pays. Each child inherits the answers; nothing of a compiled
program, a cache entry or the process's memory layout is shared (each is still a fresh fork of a
fresh server, one a round). The dry-run compile writes into a folder of its own, removed after.
"""

from __future__ import annotations

import os
import shutil
import tempfile


FOLDER: str | None = None  # where the dry run's files went (removed once done)


def _warm() -> None:
    global FOLDER
    before = os.environ.get("TORCHINDUCTOR_CACHE_DIR")  # Inductor writes the folder it settles on back into it
    folder = FOLDER = tempfile.mkdtemp(prefix="stackwars-inductor-keys-")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = folder  # the dry run's files go here, not to the user's default
    try:
        from torch._inductor import codecache, cpu_vec_isa

        codecache.torch_key()
        try:
            codecache.triton_key()  # None without Triton; hashes its sources with it
        except Exception:  # noqa: BLE001 - a Triton that cannot be read: the child works it out, as before
            pass
        cpu_vec_isa.valid_vec_isa_list()
    finally:
        if before is None:
            os.environ.pop("TORCHINDUCTOR_CACHE_DIR", None)
        else:
            os.environ["TORCHINDUCTOR_CACHE_DIR"] = before
        shutil.rmtree(folder, ignore_errors=True)


_warm()
