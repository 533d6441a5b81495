"""Hand-built records for store and report tests (no framework, no worker)."""

from stackwars.records import CellSpec, CompileStats, Measurement, MemoryStats, Parity


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
