"""A report as data (sections of paragraphs, bullet lists, tables, figures and preformatted
text), and its two renderings: a self-contained HTML page and Markdown.

The HTML page needs nothing at view time: styles inline, figures embedded as PNG data URIs,
no script. Every piece of text goes through ``html.escape`` on its way in (workload
overrides, error messages and IR excerpts are data, never markup); Markdown escapes the
characters that would open HTML or break a table. Both renderings are functions of the
document alone, so the same data gives the same bytes.
"""

from __future__ import annotations

import base64
import html
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Union


@dataclass(frozen=True)
class Para:
    text: str


@dataclass(frozen=True)
class Bullets:
    items: tuple[str, ...]
    links: tuple[str, ...] = ()  # per item, the anchor of the section it rests on ("" for none)


@dataclass(frozen=True)
class TableBlock:
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    caption: str = ""


@dataclass(frozen=True)
class Figure:
    name: str  # a file name stem: letters, digits, '-' and '_'
    png: bytes
    caption: str

    def __post_init__(self) -> None:
        if not re.fullmatch(r"[A-Za-z0-9_\-]+", self.name):
            raise ValueError(f"figure name {self.name!r}: letters, digits, '-' and '_' only")
        if self.png[:8] != b"\x89PNG\r\n\x1a\n":
            raise ValueError(f"figure {self.name}: not a PNG")


@dataclass(frozen=True)
class Pre:
    text: str
    caption: str = ""


Block = Union[Para, Bullets, TableBlock, Figure, Pre]


def anchor(title: str) -> str:
    """The id of a section with this title: what a claim links to."""
    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-") or "section"


@dataclass
class Section:
    title: str
    blocks: list[Block] = field(default_factory=list)
    anchor: str = ""

    def __post_init__(self) -> None:
        if not self.anchor:
            self.anchor = anchor(self.title)


@dataclass
class Document:
    title: str
    subtitle: str
    sections: list[Section] = field(default_factory=list)

    def figures(self) -> list[Figure]:
        return [b for s in self.sections for b in s.blocks if isinstance(b, Figure)]


_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;max-width:1200px;margin:2em auto;
padding:0 1em;color:#1d1d1f;line-height:1.45}
h1{font-size:1.7em;margin-bottom:.2em}h2{border-bottom:1px solid #ddd;padding-bottom:.2em;margin-top:2em}
.sub{color:#666}nav ol{columns:2}table{border-collapse:collapse;margin:.6em 0 1.2em;font-size:.86em}
th,td{border:1px solid #ccc;padding:.25em .5em;text-align:left;vertical-align:top}
th{background:#f3f3f3}caption{caption-side:bottom;text-align:left;
color:#555;font-size:.9em;padding-top:.3em}figure{margin:1em 0}figure img{max-width:100%;border:1px solid #eee}
figcaption{color:#555;font-size:.9em}pre{background:#f7f7f7;border:1px solid #e3e3e3;padding:.6em;overflow-x:auto;
font-size:.8em;line-height:1.3}
"""


def _e(text: str) -> str:
    return html.escape(str(text), quote=True)


def _inline(text: str) -> str:
    """Escaped, with Markdown's code spans (`stackwars run ...`, as the report.md beside it writes
    them) as <code>: a table cell in the page showed the backticks themselves."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", _e(text))


def to_html(doc: Document) -> str:
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
           '<meta name="viewport" content="width=device-width, initial-scale=1">',
           f"<title>{_e(doc.title)}</title><style>{_CSS}</style></head><body>",
           f"<h1>{_e(doc.title)}</h1>", f'<p class="sub">{_e(doc.subtitle)}</p>', "<nav><ol>"]
    out += [f'<li><a href="#{_e(s.anchor)}">{_e(s.title)}</a></li>' for s in doc.sections]
    out.append("</ol></nav>")
    for s in doc.sections:
        out.append(f'<section id="{_e(s.anchor)}"><h2>{_e(s.title)}</h2>')
        for b in s.blocks:
            if isinstance(b, Para):
                out.append(f"<p>{_e(b.text)}</p>")
            elif isinstance(b, Bullets):
                links = b.links or ("",) * len(b.items)
                out.append("<ul>" + "".join(
                    f"<li>{_e(i)}" + (f' <a href="#{_e(a)}">(cells)</a>' if a else "") + "</li>"
                    for i, a in zip(b.items, links)) + "</ul>")
            elif isinstance(b, TableBlock):
                rows = "".join("<tr>" + "".join(f"<td>{_inline(c)}</td>" for c in r) + "</tr>" for r in b.rows)
                cap = f"<caption>{_e(b.caption)}</caption>" if b.caption else ""
                head = "".join(f"<th>{_e(h)}</th>" for h in b.header)
                out.append(f"<table>{cap}<thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>")
            elif isinstance(b, Figure):
                data = base64.b64encode(b.png).decode("ascii")
                out.append(f'<figure id="fig-{_e(b.name)}"><img alt="{_e(b.caption)}" '
                           f'src="data:image/png;base64,{data}"><figcaption>{_e(b.caption)}</figcaption></figure>')
            elif isinstance(b, Pre):
                cap = f"<figcaption>{_e(b.caption)}</figcaption>" if b.caption else ""
                out.append(f"<figure><pre>{_e(b.text)}</pre>{cap}</figure>")
        out.append("</section>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"


def _m(text: str) -> str:
    """Markdown text that cannot open HTML: <, > and & as entities."""
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _cell(text: str) -> str:
    return _m(text).replace("|", "\\|").replace("\n", " ")


def to_markdown(doc: Document, figure_dir: str = "figures") -> str:
    """Figures are referenced as ``figure_dir/NAME.png`` (``write`` puts them there)."""
    out = [f"# {_m(doc.title)}", "", f"*{_m(doc.subtitle)}*", ""]
    out += [f"{i}. [{_m(s.title)}](#{s.anchor})" for i, s in enumerate(doc.sections, 1)]
    out.append("")
    for s in doc.sections:
        out += [f'<a id="{s.anchor}"></a>', "", f"## {_m(s.title)}", ""]
        for b in s.blocks:
            if isinstance(b, Para):
                out += [_m(b.text), ""]
            elif isinstance(b, Bullets):
                links = b.links or ("",) * len(b.items)
                out += [f"- {_m(i)}" + (f" [(cells)](#{a})" if a else "") for i, a in zip(b.items, links)] + [""]
            elif isinstance(b, TableBlock):
                out.append("| " + " | ".join(_cell(h) for h in b.header) + " |")
                out.append("|" + "|".join("---" for _ in b.header) + "|")
                out += ["| " + " | ".join(_cell(c) for c in r) + " |" for r in b.rows]
                out += ([f"*{_m(b.caption)}*"] if b.caption else []) + [""]
            elif isinstance(b, Figure):
                out += [f"![{_cell(b.caption)}]({figure_dir}/{b.name}.png)", "", f"*{_m(b.caption)}*", ""]
            elif isinstance(b, Pre):
                fence = "````" if "```" in b.text else "```"
                out += [fence, b.text.rstrip("\n"), fence] + ([f"*{_m(b.caption)}*"] if b.caption else []) + [""]
    return "\n".join(out) + "\n"


def write(doc: Document, out_dir: Path) -> tuple[Path, Path]:
    """report.html (self-contained), report.md and figures/*.png under ``out_dir``; each file
    written whole (a temporary name, then renamed)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    figures = out_dir / "figures"
    figures.mkdir(exist_ok=True)
    from stackwars import outputs

    for f in doc.figures():
        outputs.write(figures / f"{f.name}.png", f.png, "--out")
    page, md = out_dir / "report.html", out_dir / "report.md"
    outputs.write(page, to_html(doc), "--out")
    outputs.write(md, to_markdown(doc), "--out")
    return page, md
