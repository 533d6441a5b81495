"""The house's layers, read from the code's own imports (docs/contributing.md, "Layers").

Every module of ``stackwars/`` stands on a floor (``FLOORS``: the longest prefix that names
it). An import may run down or across a floor, never in a circle, and up only where it keeps
a framework (or pandas) out of a process that does not need it: such an import stands in a
function and carries a comment ``# upward: why`` on its line or the line above. The package
is walked with ``ast`` (``import``, ``from ... import``, and ``importlib.import_module`` of a
literal name), in functions too: an import hidden in a function is still an arrow.
"""

from __future__ import annotations

import ast
import re
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# from the ground up; a module's floor is that of the longest prefix naming it
FLOORS: dict[str, int] = {
    # 1: the ground: records, statistics, errors, units; no framework, nothing of the project above them
    "stackwars.errors": 1, "stackwars.version": 1, "stackwars.stats": 1, "stackwars.records": 1,
    "stackwars.canary": 1, "stackwars.parse": 1, "stackwars.outputs": 1,
    "stackwars.report.format": 1,  # human units: a leaf the studies' and the commands' summaries print with
    # 2: names and specs; imports no plugin (discovery registers into it from the top)
    "stackwars.registry": 2,
    # 3: what a worker runs: workloads and their twins, backends, the harness, IR, data, a user's model
    "stackwars.workloads": 3, "stackwars.backends": 3, "stackwars.harness": 3, "stackwars.ir": 3,
    "stackwars.data": 3, "stackwars.model": 3, "stackwars.commands": 3, "stackwars.precision": 3,
    # 4: the results database
    "stackwars.store": 4,
    # 5: plan, fork servers, execute: cells into measurements into the store
    "stackwars.runner": 5, "stackwars.executors": 5,
    # 6: structured experiments, planned through the runner
    "stackwars.studies": 6,
    # 7: the verdict's own rooms: which processes decide, each side's best, the decision, the next look
    "stackwars.verdict": 7,
    # 8: what a reader sees: tables, verdicts, plots, the report (it draws, it decides nothing); the rules the docs state
    "stackwars.report": 8, "stackwars.rules": 8,
    # 9: what drives runs and reads their verdicts: the looks, knobs, the published studies' plans, the GPU check
    "stackwars.orchestrate": 9, "stackwars.sensitivity": 9, "stackwars.reproduce": 9, "stackwars.gpucheck": 9,
    "stackwars.calibration": 9,
    # 10: discovery and the package's face (the public API), which installs it
    "stackwars.discovery": 10, "stackwars": 10,
    # 11: the command line and the Python API: each parses its arguments into one request and makes one call
    # 11: the command line: parses, makes one call
    "stackwars.cli": 11, "stackwars.api": 11, "stackwars.__main__": 12,
}

UPWARD = re.compile(r"#\s*upward:\s*\S")
NEVER = [  # (importer prefix, imported prefix, why): arrows no floor number may allow
    ("stackwars.report", "stackwars.harness", "the report reads records, never the harness"),
    ("stackwars.verdict", "stackwars.harness", "the verdict reads records, never the harness"),
    ("stackwars.registry", "stackwars", "the registry is a leaf: it names, it does not discover"),
]
LEAF_ALLOWED = {"stackwars.registry": {"stackwars.errors"}}
FRAMEWORKS = ("torch", "jax", "flax", "optax", "triton")
NO_FRAMEWORK = ("stackwars.errors", "stackwars.version", "stackwars.stats", "stackwars.records", "stackwars.canary",
                "stackwars.parse", "stackwars.outputs", "stackwars.registry", "stackwars.store", "stackwars.verdict", "stackwars.report",
                "stackwars.rules", "stackwars.discovery", "stackwars.commands")


@dataclass(frozen=True)
class Arrow:
    source: str
    target: str
    line: int
    in_function: bool
    reason: bool  # a "# upward:" comment on its line or the line above


def modules(package: Path) -> dict[str, Path]:
    out = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _target(name: str, known: dict[str, Path]) -> str | None:
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def arrows(package: Path) -> tuple[list[Arrow], list[str]]:
    """Every import of the package's own modules, and every plain ``import torch``-like name."""
    known = modules(package)
    root = package.name
    found: list[Arrow] = []
    seen: set[tuple[str, str, int]] = set()  # one arrow per line and target (``from x import a, b``)
    external: list[str] = []
    for mod, path in known.items():
        lines = path.read_text().splitlines()
        tree = ast.parse("\n".join(lines))
        is_package = path.name == "__init__.py"

        def add(name: str, node: ast.AST, in_function: bool) -> None:
            if name.split(".")[0] != root:
                external.append(f"{mod} {name} {node.lineno} {int(in_function)}")
                return
            target = _target(name, known)
            if target and target != mod and (mod, target, node.lineno) not in seen:
                seen.add((mod, target, node.lineno))
                near = " ".join(lines[max(0, node.lineno - 2):node.end_lineno])
                found.append(Arrow(mod, target, node.lineno, in_function, bool(UPWARD.search(near))))

        def walk(node: ast.AST, in_function: bool) -> None:
            for child in ast.iter_child_nodes(node):
                inside = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
                if isinstance(child, ast.Import):
                    for alias in child.names:
                        add(alias.name, child, inside)
                elif isinstance(child, ast.ImportFrom):
                    if child.level:
                        base = mod.split(".")[: len(mod.split(".")) - child.level + (1 if is_package else 0)]
                        source = ".".join(base + ([child.module] if child.module else []))
                    else:
                        source = child.module or ""
                    for alias in child.names:
                        sub = f"{source}.{alias.name}"
                        add(sub if sub in known else source, child, inside)
                elif (isinstance(child, ast.Call) and isinstance(child.func, ast.Attribute)
                      and child.func.attr == "import_module" and child.args
                      and isinstance(child.args[0], ast.Constant) and isinstance(child.args[0].value, str)):
                    add(child.args[0].value, child, inside)
                walk(child, inside)

        walk(tree, False)
    return found, external


def floor(module: str, floors: dict[str, int]) -> int | None:
    name = module
    while name:
        if name in floors:
            return floors[name]
        name = name.rpartition(".")[0]
    return None


def circles(found: list[Arrow]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan), each sorted."""
    graph: dict[str, set[str]] = {}
    for a in found:
        graph.setdefault(a.source, set()).add(a.target)
        graph.setdefault(a.target, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10 * len(graph) + 100))
    try:
        for v in sorted(graph):
            if v not in index:
                visit(v)
    finally:
        sys.setrecursionlimit(limit)
    return out


def problems(package: Path, floors: dict[str, int], never=(), leaves=None, no_framework=()) -> list[str]:
    """What breaks the layers, one line each, naming the file and line to open."""
    found, external = arrows(package)
    out = []
    for group in circles(found):
        ties = [f"{a.source}:{a.line} -> {a.target}" for a in found if a.source in group and a.target in group]
        out.append(f"a circle of {len(group)} modules: {', '.join(ties)}")
    for mod in modules(package):
        if floor(mod, floors) is None:
            out.append(f"{mod} stands on no floor: give it one in FLOORS and in docs/contributing.md")
    for a in found:
        up, down = floor(a.target, floors), floor(a.source, floors)
        if up is not None and down is not None and up > down and not (a.reason and a.in_function):
            out.append(f"{a.source}:{a.line} imports {a.target}, floor {up} above its {down}, "
                       + ("without a '# upward: why' comment" if a.in_function else "at module level"))
        for src, dst, why in never:
            if (a.source + ".").startswith(src + ".") and (a.target == dst or a.target.startswith(dst + ".")) \
                    and not (leaves and a.source in leaves and a.target in leaves[a.source]):
                out.append(f"{a.source}:{a.line} imports {a.target}: {why}")
    for line in external:
        mod, name, lineno, _ = line.split()
        if name.split(".")[0] in FRAMEWORKS and any((mod + ".").startswith(p + ".") for p in no_framework):
            out.append(f"{mod}:{lineno} imports {name}: this module runs in the parent, which imports no framework")
    return out


# ---- the house --------------------------------------------------------------------------------------------------


def test_the_house_has_no_circle_and_no_upward_import_without_its_reason():
    found = problems(ROOT / "stackwars", FLOORS, NEVER, LEAF_ALLOWED, NO_FRAMEWORK)
    assert found == [], "\n".join(found)


def test_the_walk_reads_the_house():
    """The walk sees the arrows it judges: the registry's one import, the twins' import of their
    package, the face's discovery, and imports inside functions."""
    found, _ = arrows(ROOT / "stackwars")
    pairs = {(a.source, a.target) for a in found}
    assert ("stackwars.registry", "stackwars.errors") in pairs
    assert ("stackwars.workloads.loops.torch_twin", "stackwars.workloads.loops") in pairs
    assert ("stackwars", "stackwars.discovery") in pairs
    assert ("stackwars.discovery", "stackwars.workloads") in pairs  # importlib.import_module of a literal name
    assert sum(a.in_function for a in found) > 50
    assert {a.target for a in found if a.source == "stackwars.registry"} == {"stackwars.errors"}
    assert len(found) > 500


# ---- the checker, on houses made to break it ---------------------------------------------------------------------


def _house(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = tmp_path / "pkg" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return tmp_path / "pkg"


FLOORS_OF_TOY = {"pkg": 3, "pkg.low": 1, "pkg.mid": 2, "pkg.top": 3}


def test_a_circle_is_found_even_through_a_function(tmp_path):
    pkg = _house(tmp_path, {"__init__.py": "", "low.py": "def f():\n    from pkg import mid  # upward: x\n",
                            "mid.py": "from pkg import low\n", "top.py": "from pkg import mid\n"})
    found = problems(pkg, FLOORS_OF_TOY)
    assert len(found) == 1 and found[0].startswith("a circle of 2 modules") and "pkg.low:2 -> pkg.mid" in found[0]


def test_an_upward_import_needs_a_function_and_its_reason(tmp_path):
    pkg = _house(tmp_path, {"__init__.py": "", "mid.py": "", "top.py": "",
                            "low.py": """\
                                from pkg import top

                                def f():
                                    from pkg import mid

                                def g():
                                    # upward: keeps torch out of the parent
                                    from pkg import mid
                                """})
    found = problems(pkg, FLOORS_OF_TOY)
    assert found == ["pkg.low:1 imports pkg.top, floor 3 above its 1, at module level",
                     "pkg.low:4 imports pkg.mid, floor 2 above its 1, without a '# upward: why' comment"]


def test_relative_imports_and_import_module_are_arrows(tmp_path):
    pkg = _house(tmp_path, {"__init__.py": "", "top.py": "", "mid.py": "",
                            "low.py": "import importlib\nfrom . import mid\nimportlib.import_module('pkg.top')\n"})
    found = problems(pkg, FLOORS_OF_TOY)
    assert [f.split(" imports ")[0] for f in found] == ["pkg.low:2", "pkg.low:3"]


def test_a_module_on_no_floor_and_a_never_are_named(tmp_path):
    pkg = _house(tmp_path, {"__init__.py": "", "low.py": "", "mid.py": "from pkg import low\n", "extra.py": "",
                            "top.py": "import torch\n"})
    floors = {k: v for k, v in FLOORS_OF_TOY.items() if k != "pkg"}
    found = problems(pkg, floors, never=[("pkg.mid", "pkg.low", "mid may not read low")], no_framework=("pkg.top",))
    assert found == ["pkg stands on no floor: give it one in FLOORS and in docs/contributing.md",
                     "pkg.extra stands on no floor: give it one in FLOORS and in docs/contributing.md",
                     "pkg.mid:1 imports pkg.low: mid may not read low",
                     "pkg.top:1 imports torch: this module runs in the parent, which imports no framework"]


# ---- the command line only parses ------------------------------------------------------------------------------


def test_run_parses_and_makes_one_call():
    """``run``'s body (past its docstring) is one call: parse into a Request, then measure it."""
    tree = ast.parse((ROOT / "stackwars" / "cli" / "run_cmd.py").read_text())
    (run,) = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "run"]
    body = run.body[1:] if isinstance(run.body[0].value, ast.Constant) else run.body
    assert len(body) == 1 and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Call)
    assert ast.unparse(body[0].value.func) == "measure"
    assert ast.unparse(body[0].value.args[0]).startswith("parse(")


def test_every_option_resume_keeps_or_a_row_writes_back_is_an_option_of_run():
    """The backend options' flags (commands.OPTION_FLAGS) and the options --resume may change
    (orchestrate.RESUME_MAY_CHANGE) are declared once; each names a parameter of ``run`` and,
    for the flags, the flag that parameter declares."""
    import typer.main

    from stackwars.cli import app
    from stackwars.commands import OPTION_FLAGS
    from stackwars.orchestrate import RESUME_MAY_CHANGE

    run = typer.main.get_command(app).commands["run"]
    params = {p.name: p for p in run.params}
    for opt, flag in OPTION_FLAGS.items():
        p = params[flag[2:].replace("-", "_")]
        assert flag in p.opts, (opt, flag, p.opts)
    assert set(RESUME_MAY_CHANGE) <= set(params), set(RESUME_MAY_CHANGE) - set(params)


# ---- the report draws; the verdict decides ---------------------------------------------------------------------

# the rules that turn figures into a decision: where any of them is called, a decision is made
DECIDING_CALLS = {"stats": {"decide", "compare_paired", "within_band", "tie_bound", "memory_difference"},
                  "sequential": None, "plan": None, "decide": None, "choose": None}  # None: every name
DECIDING_MODULES = ("stackwars.verdict.sequential", "stackwars.verdict.plan", "stackwars.verdict.decide",
                    "stackwars.verdict.choose", "stackwars.verdict.runs")
# what the verdict's rooms define: a function of that name in report/ is deciding code come back
DECIDING_NAMES = {"choose", "screen", "verdicts", "decide", "step_down", "wanted", "allot", "self_check",
                  "compare_cells", "next_look", "more_processes", "first_look", "critical", "sequential_levels"}


def deciding_code(package: Path, under: str = "report") -> list[str]:
    """Where modules under ``package/under`` decide: a call of a deciding rule (``stats.decide``, ``stats.
    compare_paired``, anything of the verdict's sequential design or its plan), an import of a deciding
    room's functions (its constants, the words and numbers a legend states, may be read;
    ``stackwars.verdict``'s own entry points are how the report gets its rows), or a function named as
    one of the verdict's rooms names its own."""
    out = []
    for path in sorted((package / under).rglob("*.py")):
        tree = ast.parse(path.read_text())
        where = f"{path.relative_to(package.parent)}"
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                full = [f"{node.module}.{a.name}" for a in node.names if not a.name.isupper()]
                full += [node.module] if not all(a.name.isupper() for a in node.names) else []
                hit = next((m for m in full if m in DECIDING_MODULES or m.rsplit(".", 1)[0] in DECIDING_MODULES), None)
                if hit:
                    out.append(f"{where}:{node.lineno} imports {hit}: a room of the verdict's, not its rows")
            elif isinstance(node, ast.Import):
                for a in node.names:
                    if a.name in DECIDING_MODULES:
                        out.append(f"{where}:{node.lineno} imports {a.name}: a room of the verdict's, not its rows")
            elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                names = DECIDING_CALLS.get(node.value.id, set())
                if names is None or node.attr in names:
                    out.append(f"{where}:{node.lineno} calls {node.value.id}.{node.attr}: a decision, made in "
                               f"stackwars/verdict/")
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in DECIDING_NAMES:
                out.append(f"{where}:{node.lineno} defines {node.name}: the verdict's rooms define it")
    return out


def test_the_report_holds_no_deciding_code():
    """Choosing a best, deciding a row and planning the next look live in stackwars/verdict/ (issue 87:
    report/verdict.py had grown to 1,400 lines of both); report/ only draws the rows they return."""
    found = deciding_code(ROOT / "stackwars")
    assert found == [], "\n".join(found)


def test_the_deciding_code_check_finds_what_it_forbids(tmp_path):
    """The check can fail: a report module that decides, imports the sequential design, or defines
    a choice of its own is named, line by line; one that draws rows is not."""
    pkg = _house(tmp_path, {"__init__.py": "", "report/__init__.py": "",
                            "report/bad.py": """\
                                from stackwars import stats
                                from stackwars.verdict.sequential import critical
                                from stackwars.verdict import plan

                                def choose(rows):
                                    return stats.decide(rows[0]), plan.wanted(rows)
                                """,
                            "report/good.py": """\
                                from stackwars import stats, verdict
                                from stackwars.verdict.words import SAME

                                def draw(rows):
                                    return [r["verdict"] == SAME for r in verdict.verdicts(rows)], stats.MARGIN
                                """})
    found = deciding_code(pkg)
    assert [f.split(" ")[0] + " " + f.split(" ")[1] for f in found] == [
        "pkg/report/bad.py:2 imports", "pkg/report/bad.py:3 imports", "pkg/report/bad.py:5 defines",
        "pkg/report/bad.py:6 calls", "pkg/report/bad.py:6 calls"], found
