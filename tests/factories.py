"""Hand-built records for store and report tests (no framework, no worker), and the measurement settings of
the tests that measure a cell only for its parity."""

from stackwars.records import CellSpec, CompileStats, MeasureConfig, Measurement, MemoryStats, Parity


# What a test that asserts parity and what ran (never a time) measures of a cell: the first call (whose
# outputs parity compares), the second, and one steady call timed alone (latency), no warm-up. In
# throughput mode a sample is at least two calls, so two samples were four calls more a cell than one:
# a jax-eager train step of a loop recompiles its control flow on every call (1-2 s each on the 2-CPU VM).
PARITY = MeasureConfig(warmup=0, min_samples=1, max_samples=1, min_time_s=0.0, timing="latency")


def measurement(backend="torch-eager", status="ok", samples=(1e-3, 1.1e-3, 0.9e-3, 1.05e-3), workload="gemm",
                phase="forward", error=None, framework=None) -> Measurement:
    return Measurement(
        spec=CellSpec(workload, "small", phase, backend),
        status=status,
        framework=framework or backend.split("-")[0],
        first_call_s=0.5 if samples else None,
        second_call_s=2e-3 if samples else None,
        warmup_s=(1.2e-3,) if samples else (),
        samples=tuple(samples),
        number=2,  # calls of about 1 ms timed in throughput mode (blocks of two), as the harness does
        compile=CompileStats(total_s=0.45, breakdown={"trace_s": 0.05, "compile_s": 0.4}) if samples else None,
        memory=MemoryStats(peak_rss_bytes=300 * 2**20, baseline_rss_bytes=250 * 2**20, rss_counter="VmHWM")
        if samples else None,
        parity=Parity(max_rel_err=1e-7, tolerance=2e-4) if samples else None,
        flops=2 * 1024**3,
        bytes_moved=3 * 4 * 1024**2,
        peak={"flops_per_s": 4e12, "bytes_per_s": 1e11},
        error=error,
    )


class FakeExecutor:
    """An executor that starts no worker: a test's subclass yields each spec's measurement from
    ``run(specs, measure, on_start=None)``; nothing to check, no scratch folders."""

    name, local, shared_dir = "synthetic", True, None

    def check(self, specs):
        pass

    def scratch(self, kind):
        return None
