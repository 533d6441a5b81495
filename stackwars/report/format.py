"""Human units for times, sizes and rates. ``None`` (not measured) prints as an em dash."""

from __future__ import annotations

DASH = "—"


def seconds(s: float | None) -> str:
    if s is None:
        return DASH
    if abs(s) < 1e-3:
        return f"{s * 1e6:.1f} µs"
    if abs(s) < 1.0:
        return f"{s * 1e3:.2f} ms"
    return f"{s:.2f} s"


def level(confidence: float) -> str:
    """A confidence level as a reader sees it: 0.96 -> '96%', 0.995 -> '99.5%'."""
    return f"{confidence * 100:.4g}%"


def interval(ratio: float | None, low: float | None, high: float | None, confidence: float | None) -> str:
    """A ratio with its interval and the level the interval was read at: '0.798 (0.686-0.882, 99%)'.
    The one way every output prints a verdict's interval (the table, the Markdown, the report and
    its figure's labels, ``compare``), so that none prints another level than the one the
    decision spent (a run that adds rounds reads each look at its own: verdict/sequential.py)."""
    if ratio is None or low is None or high is None:
        return DASH
    if confidence is None:
        raise ValueError("an interval without its level: every comparison row carries the confidence it was read at")
    return f"{ratio:.3f} ({low:.3f}-{high:.3f}, {level(confidence)})"


def duration(s: float) -> str:
    """A long wall time: '2 h 47 min', '12 min', '45 s'."""
    if s >= 3600:
        return f"{int(s // 3600)} h {int(s % 3600 // 60)} min"
    if s >= 60:
        return f"{s / 60:.0f} min"
    return f"{s:.0f} s"


def joules(j: float | None) -> str:
    if j is None:
        return DASH
    for unit, scale in (("kJ", 1e3), ("J", 1.0), ("mJ", 1e-3), ("µJ", 1e-6)):
        if abs(j) >= scale:
            return f"{j / scale:.3g} {unit}"
    return f"{j * 1e9:.3g} nJ"


def nbytes(b: float | None) -> str:
    if b is None:
        return DASH
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(b) >= scale:
            return f"{b / scale:.1f} {unit}"
    return f"{b:.0f} B"


def rate(per_s: float | None, unit: str) -> str:
    if per_s is None:
        return DASH
    for prefix, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6)):
        if per_s >= scale:
            return f"{per_s / scale:.1f} {prefix}{unit}/s"
    return f"{per_s:.0f} {unit}/s"


def quantity(n: float | None, unit: str) -> str:
    """A count with an SI prefix: 8.2 GFLOP."""
    if n is None:
        return DASH
    for prefix, scale in (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(n) >= scale:
            return f"{n / scale:.2f} {prefix}{unit}"
    return f"{n:.0f} {unit}"


def fraction(f: float | None) -> str:
    return DASH if f is None else f"{100 * f:.0f}%"


def sci(x: float | None) -> str:
    return DASH if x is None else f"{x:.1e}"


def error_line(error: str | None, limit: int = 300) -> str:
    """An error's one line for a table or a progress line: its first line that says something (not a
    traceback's header), and where that line only announces what follows ("... failed with the
    following diagnostics:"), the lines after it until one names the problem."""
    lines = [ln.strip() for ln in (error or "").splitlines() if ln.strip()
             and not ln.strip().startswith("Traceback (most recent call last)")]
    if not lines:
        return ""
    text, rest = lines[0], lines[1:]
    while text.endswith(":") and rest:
        text += " " + rest.pop(0)
    return text[:limit]


def text_console(width: int):
    """A rich console that records what is printed to it as text (``export_text``) and shows nothing
    itself: in Jupyter rich displays every console as HTML whatever its file, and a table rendered to
    text appeared in the notebook beside the text."""
    import io

    from rich.console import Console

    return Console(width=width, record=True, color_system=None, force_terminal=False, force_jupyter=False,
                   file=io.StringIO())
