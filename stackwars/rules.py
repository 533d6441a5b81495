"""The rules that decide, read from the constants the code decides with: what the legends
print and what the documentation states.

A page of the docs states a rule's value between markers, ``<!--rule:NAME-->±5%<!--/rule-->``
(the markers do not show once rendered); ``scripts/gen-docs.py`` rewrites what stands between
them from ``RULES``, and tests/test_docs.py fails when a page states a value other than the
code's, or states a rule's value without its marker. No framework is imported here.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Callable

from stackwars import canary, registry, stats
from stackwars.verdict import sequential
from stackwars.harness.reference import FLOAT32_BATCHES, FLOAT32_ERROR_FACTOR, PEER_TOLERANCE_FACTOR, TENSOR_FLOOR, \
    UPDATE_FLOOR


@dataclass(frozen=True)
class Rule:
    value: float
    text: str  # how a page states it
    what: str


WORDS = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five", 6: "six"}


def _pct(x: float, sign: bool = False) -> str:
    return ("±" if sign else "") + f"{x:.0%}"


def _sci(x: float) -> str:
    return f"{x:.0e}".replace("e-0", "e-")


def _tolerances() -> dict[str, float]:
    """The fixed parity tolerances per dtype: a micro-op's (the Workload default) and a model's."""
    micro, model = registry.workload("gemm"), registry.workload("gpt2")
    out = {}
    for name, wl in (("micro", micro), ("model", model)):
        out[f"{name}_float32"] = wl.tolerance("float32", "float32", "forward")
        out[f"{name}_tf32"] = wl.tolerance("float32", "tf32", "forward")
        out[f"{name}_bfloat16"] = wl.tolerance("bfloat16", "float32", "forward")
    return out


def _rules() -> dict[str, Rule]:
    out = {
        "tie_threshold": Rule(stats.TIE_THRESHOLD, _pct(stats.TIE_THRESHOLD, True),
                              "stackwars compare and the energy ratio: a change whose whole CI lies within this band "
                              "is the same"),
        "margin": Rule(stats.MARGIN, _pct(stats.MARGIN, True),
                       "a verdict's \"same speed\": both one-sided tests at this margin pass (run --margin), declared "
                       "before the run"),
        "noisy_bound": Rule(stats.NOISY_BOUND, _pct(stats.NOISY_BOUND, True),
                            "a CI that holds 1 but reaches past the tie band reads no difference found when it "
                            "allows no difference beyond this; else cannot say (noisy)"),
        "min_processes": Rule(stats.MIN_PROCESSES, str(stats.MIN_PROCESSES),
                              "clean rounds (or processes a side) before any look of a verdict names a winner"),
        "min_processes_word": Rule(stats.MIN_PROCESSES, WORDS.get(stats.MIN_PROCESSES, str(stats.MIN_PROCESSES)),
                                   "the same, in words"),
        "verdict_alpha": Rule(stats.VERDICT_ALPHA, _pct(stats.VERDICT_ALPHA),
                              "the chance, over all of a verdict's looks together, of naming a winner between two "
                              "equal programs"),
        "first_look": Rule(stats.FIRST_LOOK, str(stats.FIRST_LOOK),
                           "clean rounds at a verdict's first look (run --processes)"),
        "look_step": Rule(stats.LOOK_STEP, str(stats.LOOK_STEP), "clean rounds a later look adds"),
        "max_rounds": Rule(stats.MAX_ROUNDS, str(stats.MAX_ROUNDS),
                           "clean rounds a verdict may take, its looks together (run --max-processes)"),
        "futility_difference": Rule(sequential.FUTILITY_DIFFERENCE, _pct(sequential.FUTILITY_DIFFERENCE),
                                    "the difference whose chance of being decided by the cap a row's futility reads"),
        "futility_chance": Rule(sequential.FUTILITY_CHANCE, _pct(sequential.FUTILITY_CHANCE),
                                "below this chance of deciding that difference, and of showing the same speed, a "
                                "row may stop (non-binding)"),
        "equivalence_alpha": Rule(sequential.EQUIVALENCE_ALPHA, _pct(sequential.EQUIVALENCE_ALPHA),
                                  "what each one-sided test of \"same speed\" spends over all looks"),
        "noise_threshold": Rule(stats.NOISE_THRESHOLD, _pct(stats.NOISE_THRESHOLD),
                                "an IQR above this fraction of the median marks a cell (noisy)"),
        "contention_threshold": Rule(stats.CONTENTION_THRESHOLD, _pct(stats.CONTENTION_THRESHOLD),
                                     "others' CPU time above this share of the cell's CPUs makes a process busy, "
                                     "beyond what the kernel's ticks alone can add (a tick a counter read)"),
        "canary_floor": Rule(canary.FLOOR, _pct(canary.FLOOR),
                             "a process whose canary is off its run's by more than the canary's own noise, and never "
                             "less than this, is busy (slowed)"),
        "reference_error_factor": Rule(FLOAT32_ERROR_FACTOR, f"{FLOAT32_ERROR_FACTOR:g}",
                                       "each tensor of a float32 cell may be this many times further from float64 "
                                       "than the reference implementation's own float32 run of that tensor"),
        "float32_batches": Rule(FLOAT32_BATCHES, f"{FLOAT32_BATCHES}",
                                "batches over which the reference implementation's float32 error of each tensor "
                                "is taken (the largest)"),
        "tensor_floor": Rule(TENSOR_FLOOR, _sci(TENSOR_FLOOR),
                             "the least tolerance an output or a loss gets from the per-tensor rule (about 8 float32 "
                             "ulps of its largest value); with TF32 matmuls the dtype's fixed tolerance is the least"),
        "update_floor": Rule(UPDATE_FLOOR, _sci(UPDATE_FLOOR),
                             "the least tolerance a train step's update gets from the per-tensor rule (compilers "
                             "reduce over the batch in orders of their own)"),
        "peer_factor": Rule(PEER_TOLERANCE_FACTOR, f"{PEER_TOLERANCE_FACTOR:g}",
                            "a comparison with another backend's outputs allows this many times the dtype's tolerance"),
    }
    from stackwars.studies.scaling.models import MLP_TOLERANCE
    out["tolerance_scaling_mlp_float32"] = Rule(MLP_TOLERANCE["float32"], _sci(MLP_TOLERANCE["float32"]),
                                                "the scaling study's MLP: a multi-device step against the "
                                                "one-device step, float32")
    for name, value in _tolerances().items():
        kind, dtype = name.split("_", 1)
        out[f"tolerance_{name}"] = Rule(value, _sci(value),
                                        f"parity tolerance of a {'micro-op' if kind == 'micro' else 'model'} in "
                                        f"{dtype}")
    return out


@functools.cache
def _all() -> dict[str, Rule]:
    return _rules()


def __getattr__(name: str):  # RULES is built on first use: the tolerances come from the workloads' registry
    if name == "RULES":
        return _all()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
MARKER = re.compile(r"<!--rule:([a-z0-9_]+)-->(.*?)<!--/rule-->", re.S)


def render(text: str, on_unknown: Callable[[str], None] | None = None) -> str:
    """``text`` with every marked value rewritten from the code."""
    def sub(m: re.Match) -> str:
        rule = _all().get(m.group(1))
        if rule is None:
            if on_unknown:
                on_unknown(m.group(1))
            return m.group(0)
        return f"<!--rule:{m.group(1)}-->{rule.text}<!--/rule-->"
    return MARKER.sub(sub, text)


def table() -> str:
    """The rules as a Markdown table (docs/reference/rules.md)."""
    lines = ["| rule | value | what it decides |", "|---|---|---|"]
    lines += [f"| `{name}` | <!--rule:{name}-->{r.text}<!--/rule--> | {r.what} |" for name, r in _all().items()]
    return "\n".join(lines) + "\n"


# ---- statements of a rule in prose ------------------------------------------------------------------------
PCT = r"±?\d+(?:\.\d+)?\s?%"
SCI = r"\d(?:\.\d+)?e-\d+"
# a rule stated in words: the value must stand between markers (gen-docs.py then keeps it true)
STATEMENTS = {
    "tolerance": (rf"tolerances?\b[^.;]{{0,12}}?(?:float32|TF32|bfloat16|of|is|:|\()?\s*({SCI})",
                  rf"(?:float32|TF32|bfloat16)\s+({SCI})(?=[^.]*?\btolerance)",
                  rf"\btolerances?\b[^.]*?(?:float32|TF32|bfloat16)\s+({SCI})"),
    "tie": (rf"({PCT})\s+tie (?:threshold|band)", rf"tie (?:threshold|band)\s*(?:of\s*|\(\s*)?({PCT})",
            rf"\btie\b[^.]{{0,60}}?within\s+({PCT})", rf"same speed\W{{0,3}}\s*\(?within\s+({PCT})"),
    "noisy": (rf"hold(?:s|ing)? 1[^.]{{0,40}}?({PCT})", rf"wider than\s+({PCT})", rf"allows? (?:a difference of )?more than\s+({PCT})"),
    "contention": (rf"(?:over|above|more than)\s+({PCT})\s+of\s+(?:[\w']+\s+){{0,2}}CPUs",
                   rf"contention[^.]{{0,40}}?(?:over|above|more than)\s+({PCT})"),
    "noise": (rf"IQR\s*(?:over|above|>|of more than)\s*({PCT})", rf"spread (?:between processes )?over\s+({PCT})"),
    "processes": (r"\b(three|two|four|five|\d+)\s+(?:or more\s+)?clean (?:processes|ones)",),
    "canary": (rf"canary[^.]{{0,80}}?({PCT})",),
}


def unmarked(text: str) -> list[tuple[int, str, str]]:
    """Statements of a rule whose value does not stand between markers: (line, kind, excerpt)."""
    plain = MARKER.sub(lambda m: "\0" * len(m.group(0)), text)  # marked values blanked, offsets kept
    # a program's output quoted on a page (a notebook's, scripts/gen-docs.py) is what the code printed, not prose
    plain = re.sub(r"<!-- output -->.*?<!-- /output -->", lambda m: " " * len(m.group(0)), plain, flags=re.S)
    plain = re.sub(r"<!--.*?-->", lambda m: " " * len(m.group(0)), plain, flags=re.S)
    out = []
    for kind, patterns in STATEMENTS.items():
        for pattern in patterns:
            for m in re.finditer(pattern.replace(" ", r"\s+"), plain, flags=re.I):  # prose wraps anywhere
                line = text.count("\n", 0, m.start(1)) + 1
                out.append((line, kind, text[max(0, m.start() - 30):m.end() + 10].replace("\n", " ")))
    return sorted(set(out))


def problems(text: str) -> list[str]:
    """What a page states against the code: a marked value that is not the rule's, a marker
    naming no rule, a rule stated without its marker."""
    out = []
    for m in MARKER.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        rule = _all().get(m.group(1))
        if rule is None:
            out.append(f"line {line}: no rule named {m.group(1)!r} (known: {', '.join(_all())})")
        elif m.group(2) != rule.text:
            out.append(f"line {line}: {m.group(1)} is {rule.text} in the code, the page says {m.group(2)}")
    out += [f"line {line}: a {kind} rule stated without its marker: …{excerpt}…"
            for line, kind, excerpt in unmarked(text)]
    return out


def page() -> str:
    """docs/reference/rules.md."""
    return ("<!-- generated by scripts/gen-docs.py from stackwars/rules.py; do not edit -->\n"
            "# The rules that decide\n\n"
            "Every threshold, bound and tolerance a verdict, a table or a parity check applies, read from the "
            "constant the code uses. The other pages state these values between markers that "
            "`scripts/gen-docs.py` rewrites from here, and a test fails when a page states another value.\n\n"
            + table())
