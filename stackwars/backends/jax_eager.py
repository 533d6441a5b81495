"""jax-eager: JAX without jit. Each primitive is dispatched (and, on first use, compiled)
on its own; the compile stats count those per-primitive compiles."""

from stackwars.backends.jax_common import COMPILE_EVENT, TRACE_EVENT, JaxBackend
from stackwars.records import CompileStats


class JaxEager(JaxBackend):

    def prepare(self, *args, **kwargs):
        prepared = super().prepare(*args, **kwargs)
        prepared.compile_stats = self._stats
        return prepared

    def _stats(self) -> CompileStats:
        n, compile_s = self.events.first(COMPILE_EVENT)
        _, trace_s = self.events.first(TRACE_EVENT)
        return CompileStats(
            total_s=compile_s + trace_s,
            breakdown={"primitive_trace_s": trace_s, "primitive_compile_s": compile_s},
            recompiles=self.events.after_first(COMPILE_EVENT),
            source="jax.monitoring duration events during the first call",
            extra={"primitive_executables_compiled": n, "persistent_cache": dict(self.events.cache)},
        )
