"""Studies: structured experiments over many measurements. Importing registers them."""

from dataclasses import dataclass

from stackwars.registry import register_study
from stackwars.studies import mnist  # noqa: F401  (registers itself)


@dataclass(frozen=True)
class StudyInfo:
    name: str
    kind: str  # "train" (stackwars train NAME) or "study" (stackwars study NAME)
    description: str


register_study(StudyInfo("recompile", "study", "recompiles over a sequence of shapes / dtypes / Python scalars "
                                               "(stackwars study recompile)"))
register_study(StudyInfo("cache", "study", "first call with cold vs warm compile caches (stackwars study cache)"))
register_study(StudyInfo("control-flow", "study", "loops, data-dependent loops and branches over a sweep of n: "
                                                  "the cliffs (stackwars study control-flow)"))
register_study(StudyInfo("stream", "study", "variable-length requests under each shape policy: compiles, "
                                            "padding, break-even, parity (stackwars study stream)"))
register_study(StudyInfo("vmap", "study", "per-example dot product and attention: loop, vmap, batched; S5's "
                                          "method beside the harness (stackwars study vmap)"))
register_study(StudyInfo("autotune", "study", "XLA's GPU autotuning: compile cost and run-time gain per matmul "
                                              "precision (stackwars study autotune)"))
register_study(StudyInfo("scaling", "study", "data-parallel train steps over 1, 2, 4... devices: JAX sharding vs "
                                             "DDP / FSDP2 (stackwars study scaling)"))
