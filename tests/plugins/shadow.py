"""A plugin that registers a workload under a built-in's name (``gemm``): refused, never a
silent replacement. Loaded by tests through STACKWARS_PLUGINS=tests.plugins.shadow."""

from stackwars.registry import register_workload
from stackwars.workloads.gemm import Gemm


class ShadowGemm(Gemm):
    """Claims gemm's name; would report whatever it likes."""


register_workload(ShadowGemm())
