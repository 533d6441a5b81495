"""The verdict's words: what a row may say, and the names it is said in.

Every reader of a verdict row (the deciding rooms beside this one, the report, the command line)
says a row's verdict in these words and no others.
"""

from __future__ import annotations

from typing import Any, Mapping

from stackwars import stats

FRAMEWORKS = (("torch", "PyTorch"), ("jax", "JAX"))
# the kinds of program a CUDA table sets against each other (verdict/choose.replay_kinds)
REPLAY_KINDS = {True: "graph replay", False: "no graph replay"}

# stats.decide's "tie" is two findings, never one word: the CI lies within the tie band (the two
# run at the same speed, within ±5%), or it only holds 1 (no difference was found, and the CI
# still allows one of up to ±20%); a reader takes "tie" for the first
SAME, NO_DIFFERENCE = "same speed", "no difference found"
VERDICTS = ("JAX faster", "PyTorch faster", SAME, NO_DIFFERENCE, "cannot say")
DECIDED = ("JAX faster", "PyTorch faster", SAME)  # the words that answer; the others leave a row open

DECISION = {"lower": "JAX faster", "higher": "PyTorch faster", "noisy": "cannot say"}

ENERGY_DECISION = {"lower": "JAX uses less", "higher": "PyTorch uses less", "noisy": "cannot say"}

SAME_ENERGY = "same energy"


def word(decision: str, c: stats.Comparison, threshold: float = stats.TIE_THRESHOLD, energy: bool = False) -> str:
    """The verdict a decision reads as: "same speed" only where the CI lies within the tie band,
    "no difference found" where it holds 1 and reaches past it (the one rule: stats.decide)."""
    if decision == "tie":
        if stats.within_band(c, threshold):
            return SAME_ENERGY if energy else SAME
        return NO_DIFFERENCE
    return (ENERGY_DECISION if energy else DECISION)[decision]


def tied(verdict: str | None) -> bool:
    """Whether a verdict says the two sides do not differ (either finding of stats.decide's tie)."""
    return verdict in (SAME, NO_DIFFERENCE, SAME_ENERGY)


def inside_band(c: stats.Comparison) -> str | None:
    """A difference the CI shows but the tie band holds, in words ("PyTorch 1-4% faster"), or None
    where the CI holds 1."""
    if c.ci_high < 1.0:  # JAX's time lower: JAX faster by 1/ci_high - 1 to 1/ci_low - 1
        lo, hi = 1.0 / c.ci_high - 1.0, 1.0 / c.ci_low - 1.0
        who = "JAX"
    elif c.ci_low > 1.0:
        lo, hi, who = c.ci_low - 1.0, c.ci_high - 1.0, "PyTorch"
    else:
        return None
    return f"{who} {lo * 100:.0f}-{hi * 100:.0f}% faster" if round(lo * 100) != round(hi * 100) else \
        f"{who} {lo * 100:.0f}% faster"


def title(r: Mapping[str, Any]) -> str:
    over = f" · {r['overrides']}" if r.get("overrides") else ""
    prec = "" if r.get("matmul_precision") in (None, "float32") else f" · {r['matmul_precision']} matmuls"
    replay = f" · {r['replay']}" if r.get("replay") else ""
    return f"{r['workload']} · {r['preset']} · {r['phase']} · {r['device']} · {r['dtype']}{over}{prec}{replay}"
