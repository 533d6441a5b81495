"""The repetition logic, driven by a fake clock: no device, no sleep."""

import pytest

from stackwars.harness.timer import Readout, Timer


class FakeDevice:
    """A clock that advances by each call's duration only when the caller synchronises,
    like an asynchronous device: forgetting to sync makes a call look free."""

    def __init__(self, durations):
        self.durations = list(durations)
        self.now = 0.0
        self.pending = 0.0
        self.calls = 0
        self.synced = []

    def clock(self):
        return self.now

    def fn(self):
        d = self.durations[min(self.calls, len(self.durations) - 1)]
        self.calls += 1
        self.pending += d
        return self.calls

    def sync(self, outs):
        self.synced.append(list(outs))
        self.now += self.pending
        self.pending = 0.0


def test_once_includes_the_synchronised_device_time():
    dev = FakeDevice([2.0, 0.5])
    t = Timer(dev.fn, dev.sync, dev.clock)
    first, out = t.once()
    second, _ = t.once()
    assert (first, second) == (2.0, 0.5)
    assert out == 1 and dev.synced == [[1], [2]]


def test_unsynchronised_timer_would_lie():
    # the same device with a no-op sync: this is what the seeds' timers measured
    dev = FakeDevice([2.0])
    t = Timer(dev.fn, lambda outs: None, dev.clock)
    assert t.once()[0] == 0.0


def test_steady_needs_both_min_samples_and_min_time():
    dev = FakeDevice([0.125])  # exact in binary, so the budget arithmetic is exact
    t = Timer(dev.fn, dev.sync, dev.clock)
    st = t.steady(min_samples=3, min_time_s=1.0, max_samples=1000)
    # 3 samples would take 0.375 s; the time budget demands >= 1.0 s
    assert len(st.samples) == 8
    assert all(s == 0.125 for s in st.samples)
    st = t.steady(min_samples=20, min_time_s=0.5, max_samples=1000)
    assert len(st.samples) == 20  # count budget dominates


def test_steady_stops_at_max_samples():
    dev = FakeDevice([0.001])
    st = Timer(dev.fn, dev.sync, dev.clock).steady(min_samples=5, min_time_s=100.0, max_samples=50)
    assert len(st.samples) == 50


def test_blocks_divide_by_number_and_sync_every_output_of_the_block():
    dev = FakeDevice([0.25])
    st = Timer(dev.fn, dev.sync, dev.clock).steady(min_samples=4, min_time_s=0.0, max_samples=100, number=8)
    assert st.number == 8
    assert len(st.samples) == 4
    assert all(s == pytest.approx(0.25) for s in st.samples)
    assert all(len(outs) == 8 for outs in dev.synced)  # one sync per block, on all 8 outputs


def test_samples_keep_their_spread():
    dev = FakeDevice([1.0, 3.0, 2.0, 5.0])
    st = Timer(dev.fn, dev.sync, dev.clock).steady(min_samples=4, min_time_s=0.0, max_samples=4)
    assert st.samples == (1.0, 3.0, 2.0, 5.0)


def test_choose_number():
    assert Timer.choose_number(0.01, 1e-3) == 1
    assert Timer.choose_number(1e-3, 1e-3) == 1
    assert Timer.choose_number(1e-5, 1e-3) == 100
    assert Timer.choose_number(3e-4, 1e-3) == 4
    assert Timer.choose_number(0.0, 1e-3, max_number=77) == 77


def test_warmup_records_each_call():
    dev = FakeDevice([3.0, 1.0, 1.0, 1.0])
    t = Timer(dev.fn, dev.sync, dev.clock)
    assert t.warmup(3) == [3.0, 1.0, 1.0]


def test_invalid_budgets_rejected():
    dev = FakeDevice([1.0])
    with pytest.raises(ValueError):
        Timer(dev.fn, dev.sync, dev.clock).steady(min_samples=5, min_time_s=0, max_samples=4)


def test_warm_then_steady_sizes_blocks_from_the_warmup():
    dev = FakeDevice([1.0, 2.0**-13])  # a slow first warm-up call, then ~122 µs calls (binary-exact)
    warm, st = Timer(dev.fn, dev.sync, dev.clock).warm_then_steady(
        warmup=3, min_samples=5, min_time_s=0.0, max_samples=100, min_block_s=1e-3, fallback_estimate_s=1.0)
    assert warm == [1.0, 2.0**-13, 2.0**-13]
    assert st.number == 9  # median warm-up 122 µs -> ceil(1 ms / 122 µs) = 9 calls per block
    # min_samples counts samples, each one block: 5 blocks of 9 calls (before, 5 calls fit in one block: one sample)
    assert len(st.samples) == 5 and all(s == pytest.approx(2.0**-13) for s in st.samples)
    assert st.mode == "throughput"


def test_before_steady_runs_between_warmup_and_the_first_sample():
    dev = FakeDevice([1e-2])
    seen = []
    timer = Timer(dev.fn, dev.sync, dev.clock)
    warm, st = timer.warm_then_steady(warmup=2, min_samples=3, min_time_s=0.0, max_samples=10, min_block_s=0.0,
                                      fallback_estimate_s=1.0, before_steady=lambda: seen.append(dev.calls),
                                      mode="latency")
    assert seen == [2]  # both warm-up calls done, no steady call yet
    assert len(warm) == 2 and len(st.samples) == 3 and dev.calls == 5


def test_a_flush_between_calls_runs_before_every_timed_call_and_stays_off_the_clock():
    """--flush-l2: the flush takes 1 s of fake time before each call; no sample contains it,
    and calls of 1 µs that would be blocked 1000 to a sample are each their own sample."""
    dev = FakeDevice([1e-6])
    order = []

    def flush():
        order.append("flush")
        dev.now += 1.0

    def fn():
        order.append("call")
        return dev.fn()

    t = Timer(fn, dev.sync, dev.clock, between=flush)
    first, _ = t.once()
    warm, steady = t.warm_then_steady(2, 5, 0.0, 5, min_block_s=1e-3, fallback_estimate_s=1e-6, mode="latency")
    assert first == pytest.approx(1e-6) and warm == pytest.approx([1e-6, 1e-6])
    assert steady.number == 1 and steady.samples == pytest.approx((1e-6,) * 5)
    assert order == ["flush", "call"] * 8
    with pytest.raises(ValueError, match="number=1"):
        t.steady(1, 0.0, 1, number=10)
    with pytest.raises(ValueError, match="latency mode"):  # a flush cannot sit inside a block
        t.warm_then_steady(0, 5, 0.0, 5, min_block_s=1e-3, fallback_estimate_s=1e-6)


@pytest.mark.parametrize("call_s", [1e-6, 5e-4, 9e-4, 1.1e-3, 0.25, 3.0])
def test_one_mode_whatever_a_call_lasts(call_s):
    """The mode is the run's, not the call's: in throughput mode a call of 1 µs and one of 3 s
    are both timed in blocks of at least two (so that a cell of 0.9 ms and one of 1.1 ms, the two
    sides of one comparison, are timed alike), in latency mode both one call a sample; and
    min_samples counts samples, each one block, in both modes."""
    for mode, expect in (("throughput", lambda n: n >= 2), ("latency", lambda n: n == 1)):
        dev = FakeDevice([call_s])
        warm, st = Timer(dev.fn, dev.sync, dev.clock).warm_then_steady(
            warmup=1, min_samples=10, min_time_s=0.0, max_samples=10_000, min_block_s=1e-3,
            fallback_estimate_s=call_s, mode=mode)
        assert expect(st.number) and st.mode == mode, (mode, st.number)
        assert all(s == pytest.approx(call_s) for s in st.samples)
        assert len(st.samples) == 10  # the samples min_samples asks for, whatever a block holds
        if mode == "throughput" and call_s >= 1e-3:
            assert st.number == 2  # a long call: blocks of two
        assert all(len(outs) == st.number for outs in dev.synced[1:])  # one sync a sample, on all its calls
    with pytest.raises(ValueError, match="timing mode"):
        Timer.calls_per_sample("burst", 1e-3, 1e-3)


class Recorder(Readout):
    """A readout that logs its hooks against the fake device's clock and pending work."""

    def __init__(self, dev, need_calls=0):
        self.dev, self.log, self.need = dev, [], need_calls
        self.calls = 0

    def begin_sample(self):
        self.log.append(("begin", self.dev.calls))

    def end_calls(self):
        self.log.append(("end", self.dev.calls, self.dev.pending))  # inside: the calls issued, not yet synced

    def after_sample(self, now, calls):
        self.calls = calls
        self.log.append(("after", now, calls))

    def satisfied(self, now):
        return self.calls >= self.need


def test_readouts_read_the_timed_calls_themselves():
    """A readout's hooks bracket the same calls the clock times (``end_calls`` after the last
    call of a sample and before its synchronisation), the issue time is read at the first
    call's return, and a readout that needs more calls lengthens the window."""
    dev = FakeDevice([0.25])
    r = Recorder(dev, need_calls=12)
    st = Timer(dev.fn, dev.sync, dev.clock).steady(min_samples=2, min_time_s=0.0, max_samples=100, number=2,
                                                   readouts=[r], issue=True, mode="throughput")
    assert len(st.samples) == 6 and st.number == 2  # 2 asked for; the readout needed 12 calls
    assert st.issue == (0.0,) * 6  # the fake device's calls return at once: the host issued them in no time
    assert r.log[:3] == [("begin", 0), ("end", 2, 0.5), ("after", 0.5, 2)]
    assert [e for e in r.log if e[0] == "after"][-1] == ("after", 3.0, 12)


class LoadedDevice(FakeDevice):
    """A machine that speeds up after its warm-up (a fast CPU, or a neighbour that left) or slows
    down (the suite's other worker arrived): the steady calls last ``factor`` times the warm ones."""

    def __init__(self, warm_s, factor, warm_calls):
        super().__init__([warm_s] * warm_calls + [warm_s * factor])


@pytest.mark.parametrize("mode", ["throughput", "latency"])
@pytest.mark.parametrize("warm_s,factor", [(1e-6, 1.0), (2e-5, 1.0), (2e-5, 700.0), (5e-3, 0.01), (0.1, 3.0)])
@pytest.mark.parametrize("min_block_s", [0.0, 1e-3, 30.0])
def test_a_steady_state_holds_min_samples_samples_whatever_the_block_size(mode, warm_s, factor, min_block_s):
    """Issue 67: a throughput window took ceil(min_samples / number) blocks, so a fast call (a
    fast CPU) made blocks of many calls, and a steady state of one sample once the suite's load
    slowed those calls (gemm tiny torch-eager, min_samples=2: 1 sample of 14.1 ms). Now every
    mode, every block size and every speed change between the warm-up and the window gives at
    least min_samples samples, each one synchronised block; min_time_s 0 so the count alone decides."""
    dev = LoadedDevice(warm_s, factor, warm_calls=2)
    warm, st = Timer(dev.fn, dev.sync, dev.clock).warm_then_steady(
        warmup=2, min_samples=10, min_time_s=0.0, max_samples=10_000, min_block_s=min_block_s,
        fallback_estimate_s=warm_s, mode=mode)
    assert len(st.samples) == 10 and st.mode == mode
    blocks = dev.synced[2:]  # after the two warm-up calls, one sync a sample
    assert len(blocks) == 10 and all(len(b) == st.number for b in blocks)
    assert all(x == pytest.approx(warm_s * factor) for x in st.samples)  # per call, as the window ran
    if mode == "throughput":  # blocks sized from the warm-up: at least 2 calls and min_block_s (or the cap)
        assert st.number >= 2 and (st.number == 10_000 or st.number * warm_s >= min_block_s)
    else:
        assert st.number == 1


def test_choose_number_never_overflows():
    """--min-block-time 1e308 made ceil(inf) raise OverflowError inside the cell; the count is capped."""
    assert Timer.choose_number(1e-6, 1e308) == 10_000
    assert Timer.choose_number(5e-324, 1.0, max_number=3) == 3
    assert Timer.calls_per_sample("throughput", 1e-9, 1e308) == 10_000
