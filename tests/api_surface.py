"""What of a library's API stackwars uses, and whether another release of it has each name,
read from source (no import): for a release this machine cannot install (jax 0.11.2, the
GPU image's, needs Python 3.12; this machine has 3.11).

Uses: every ``import pkg.mod``, ``from pkg.mod import name`` and attribute chain on a name
bound to a package module (``jax.tree.map``, ``jnp.ones``, ``optax.adamw``) in stackwars'
source. A chain resolves while its parts are modules (``pkg/a.py`` or ``pkg/a/__init__.py``);
its first part that is not a module must be a name the module binds (a def, a class, an
assignment, an import, or an entry of a lazy/deprecation table). A module with ``import *``
binds names this cannot list, and is taken to have any name.
"""

from __future__ import annotations

import ast
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable


class Source:
    """A package's files, from a wheel or a folder: path -> text."""

    def __init__(self, files: dict[str, str]):
        self.files = files
        self._names: dict[str, set[str] | None] = {}

    @classmethod
    def wheel(cls, path: Path) -> "Source":
        with zipfile.ZipFile(path) as z:
            return cls({n: z.read(n).decode("utf-8", "replace") for n in z.namelist() if n.endswith((".py", ".pyi"))})

    @classmethod
    def installed(cls, root: Path) -> "Source":
        return cls({str(p.relative_to(root)): p.read_text(errors="replace") for p in root.rglob("*.py*")
                    if p.suffix in (".py", ".pyi")})

    def module(self, dotted: str) -> str | None:
        base = dotted.replace(".", "/")
        # .pyi: the stubs of an extension module (torch._C) name what it binds
        for path in (f"{base}.py", f"{base}/__init__.py", f"{base}.pyi", f"{base}/__init__.pyi"):
            if path in self.files:
                return path
        return None

    def names(self, path: str) -> set[str] | None:
        """Names a module binds at its top level (None: it star-imports, so any)."""
        if path not in self._names:
            self._names[path] = _bound(self.files[path])
        return self._names[path]

    def has(self, chain: str) -> bool:
        parts = chain.split(".")
        if self.module(parts[0]) is None:
            return False
        for i in range(1, len(parts)):
            if self.module(".".join(parts[:i + 1])) is not None:
                continue
            names = self.names(self.module(".".join(parts[:i])))
            return names is None or parts[i] in names
        return True


def _bound_by_text(text: str) -> set[str] | None:
    """The same, read line by line: for source in a newer Python's syntax than this one's
    (jax 0.11.2 writes ``class Tracer[TraceType: Trace]``, Python 3.12's type parameters)."""
    if re.search(r"^\s*from\s+\S+\s+import\s+\*", text, re.M):
        return None
    names = set(re.findall(r"^\s*(?:async\s+)?(?:def|class)\s+([A-Za-z_]\w*)", text, re.M))
    names.update(re.findall(r"^\s*([A-Za-z_]\w*)\s*(?::[^=\n]*)?=(?!=)", text, re.M))
    names.update(re.findall(r"^\s*type\s+([A-Za-z_]\w*)\s*(?:\[[^\]]*\])?\s*=", text, re.M))
    for block in re.findall(r"^\s*from\s+\S+\s+import\s+(\([^)]*\)|[^\n]+)", text, re.M):
        for item in re.sub(r"#[^\n]*", "", block).strip("()").split(","):
            words = item.split()
            if words:
                names.add(words[-1])  # "a" or "a as b"
    for item in re.findall(r"^\s*import\s+([^\n]+)", text, re.M):
        for part in item.split(","):
            words = part.split()
            if words:
                names.add(words[-1].split(".")[0] if len(words) == 1 else words[-1])
    if re.search(r"^def __getattr__", text, re.M):
        names.update(re.findall(r"""^\s*["']([A-Za-z_][A-Za-z0-9_]*)["']\s*:""", text, re.M))
    return names


def _bound(text: str) -> set[str] | None:
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return _bound_by_text(text)
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Import):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if any(a.name == "*" for a in node.names):
                return None
            names.update(a.asname or a.name for a in node.names)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                names.update(n.id for n in ast.walk(t) if isinstance(n, ast.Name))
    # names served by a module __getattr__ from a table ("_deprecations", lazy loaders): its string keys
    if re.search(r"^def __getattr__", text, re.M):
        names.update(re.findall(r"""^\s*["']([A-Za-z_][A-Za-z0-9_]*)["']\s*:""", text, re.M))
    return names


@dataclass(frozen=True)
class Use:
    chain: str  # e.g. jax.tree.map
    where: str  # file:line


def uses(files: Iterable[Path], packages: tuple[str, ...], root: Path) -> list[Use]:
    """Every chain on ``packages`` the files use (see the module docstring)."""
    out: list[Use] = []
    for path in files:
        tree = ast.parse(path.read_text())
        where = str(path.relative_to(root))
        alias: dict[str, str] = {}  # local name -> dotted module
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.split(".")[0] in packages:
                        out.append(Use(a.name, f"{where}:{node.lineno}"))
                        alias[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0 \
                    and node.module.split(".")[0] in packages:
                for a in node.names:
                    if a.name == "*":
                        continue
                    chain = f"{node.module}.{a.name}"
                    out.append(Use(chain, f"{where}:{node.lineno}"))
                    alias[a.asname or a.name] = chain
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and not isinstance(getattr(node, "ctx", None), ast.Store):
                parts: list[str] = []
                cur: ast.AST = node
                while isinstance(cur, ast.Attribute):
                    parts.append(cur.attr)
                    cur = cur.value
                if isinstance(cur, ast.Name) and cur.id in alias:
                    out.append(Use(".".join([alias[cur.id], *reversed(parts)]), f"{where}:{node.lineno}"))
    return out


def missing(source: Source, used: Iterable[Use], package: str) -> list[Use]:
    """The uses of ``package`` that ``source`` lacks (each chain once, at its first use)."""
    seen, out = set(), []
    for u in used:
        if u.chain.split(".")[0] != package or u.chain in seen:
            continue
        seen.add(u.chain)
        if not source.has(u.chain):
            out.append(u)
    return out
