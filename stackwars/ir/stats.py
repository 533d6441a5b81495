"""Statistics of intermediate forms, read from their text (no framework imported).

* StableHLO (MLIR text): op histogram, function arguments vs baked constants, element
  types, dtype conversions, custom calls.
* Optimized HLO (XLA's ``as_text`` after its passes): fusions and their kinds, the
  top-level and the fused op histograms.
* jaxpr: primitive histogram, recursing into sub-jaxprs (``pjit``, ``custom_jvp_call``...).
* FX graphs (Dynamo, AOTAutograd, post-grad): call targets, placeholders (lifted
  inputs), get_attr nodes (parameters baked into the graph module).
* Inductor output code: generated kernels (C++ on CPU, Triton on GPU) and extern calls.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

SKIP_OPS = {"func.func", "func.return", "stablehlo.return", "builtin.module"}
_MLIR_OP = re.compile(r'^\s*(?:%[^=]*=\s*)?"?([a-z_]+\.[a-z_0-9]+)')
_MAIN_ARGS = re.compile(r"func\.func (?:public )?@main\((.*?)\)\s*(?:->|\{)", re.S)
_CONST = re.compile(r"stablehlo\.constant dense<(.*?)> : tensor<([^>]*)>")
_TENSOR = re.compile(r"tensor<([0-9x?]*?)x?(bf16|f16|f32|f64|i1|i8|i16|i32|i64|ui8|ui32|complex<f32>)>")


def _numel(dims: str) -> int:
    n = 1
    for d in filter(None, dims.split("x")):
        n *= int(d) if d.isdigit() else 1
    return n


def stablehlo(text: str) -> dict[str, Any]:
    ops: Counter[str] = Counter()
    for line in text.splitlines():
        m = _MLIR_OP.match(line)
        if m and m.group(1) not in SKIP_OPS:
            ops[m.group(1)] += 1
    main = _MAIN_ARGS.search(text)
    args = len(re.findall(r"%arg\d+\s*:", main.group(1))) if main else 0
    baked, splats = 0, 0
    for value, ttype in _CONST.findall(text):
        dims = ttype.rsplit("x", 1)[0] if "x" in ttype else ""
        if value.startswith("[") or value.startswith('"0x'):
            if _numel(dims) > 1:
                baked += 1  # a non-uniform tensor written into the program
        else:
            splats += 1
    types = Counter(t for _, t in _TENSOR.findall(text))
    return {
        "ops": dict(ops.most_common()),
        "n_ops": sum(ops.values()),
        "functions": text.count("func.func"),
        "arguments": args,
        "baked_constants": baked,
        "splat_constants": splats,
        "element_types": dict(types),
        "converts": ops.get("stablehlo.convert", 0),
        "has_f64": "f64" in types,
        "custom_calls": sorted(set(re.findall(r"custom_call @(\w+)", text)) |
                               set(re.findall(r'call_target_name = "([^"]+)"', text))),
    }


def _split_hlo_computations(text: str) -> list[tuple[str, list[str]]]:
    comps: list[tuple[str, list[str]]] = []
    name, body = None, []
    for line in text.splitlines():
        header = re.match(r"^(?:ENTRY\s+)?%?([\w.\-]+)\s.*\{\s*$", line)
        if header and not line.startswith(" "):
            name, body = ("ENTRY:" if line.startswith("ENTRY") else "") + header.group(1), []
        elif line.startswith("}") and name is not None:
            comps.append((name, body))
            name = None
        elif name is not None:
            body.append(line)
    return comps


def _hlo_opcode(line: str) -> str | None:
    m = re.match(r"^\s*(?:ROOT\s+)?%?[\w.\-]+\s*=\s*(.*)$", line)
    if not m:
        return None
    rest = m.group(1)
    if rest.startswith("("):  # tuple-shaped result: skip the balanced shape
        depth = 0
        for i, ch in enumerate(rest):
            depth += ch == "("
            depth -= ch == ")"
            if depth == 0:
                rest = rest[i + 1:]
                break
    else:
        rest = rest.split(" ", 1)[1] if " " in rest else ""
    op = re.match(r"\s*([a-z][\w\-]*)\(", rest)
    return op.group(1) if op else None


def hlo(text: str) -> dict[str, Any]:
    """Top level = the ENTRY computation; fused = the bodies of fusions. Other computations
    (reducers such as ``%region_3.6``) are called from inside those and not counted."""
    top: Counter[str] = Counter()
    fused: Counter[str] = Counter()
    kinds: Counter[str] = Counter()
    for name, body in _split_hlo_computations(text):
        if name.startswith("ENTRY:"):
            target = top
        elif "fused" in name:
            target = fused
        else:
            continue
        for line in body:
            op = _hlo_opcode(line)
            if op is None:
                continue
            target[op] += 1
            if op == "fusion" and target is top:
                k = re.search(r"kind=(k\w+)", line)
                kinds[k.group(1) if k else "?"] += 1
    return {"ops": dict(top.most_common()), "fused_ops": dict(fused.most_common()),
            "n_ops": sum(top.values()), "fusions": top.get("fusion", 0), "fusion_kinds": dict(kinds)}


def jaxpr(closed: Any) -> dict[str, Any]:
    prims: Counter[str] = Counter()

    def walk(j: Any) -> None:
        j = getattr(j, "jaxpr", j)
        for eqn in j.eqns:
            prims[eqn.primitive.name] += 1
            for v in eqn.params.values():
                for sub in v if isinstance(v, (list, tuple)) else (v,):
                    if hasattr(sub, "eqns") or hasattr(getattr(sub, "jaxpr", None), "eqns"):
                        walk(sub)

    walk(closed)
    inner = getattr(closed, "jaxpr", closed)
    return {"ops": dict(prims.most_common()), "n_ops": sum(prims.values()), "arguments": len(inner.invars),
            "baked_constants": len(getattr(closed, "consts", []) or [])}


def fx(nodes: str) -> dict[str, Any]:
    """An FX graph's node listing (``str(gm.graph)``): one line per node, ``op[target=...]``."""
    targets = Counter(re.findall(r"call_(?:function|method|module)\[target=([^\]]+)\]", nodes))
    return {"ops": dict(targets.most_common()), "n_ops": sum(targets.values()),
            "placeholders": len(re.findall(r"= placeholder\[target=", nodes)),  # inputs lifted to arguments
            "get_attr": len(re.findall(r"= get_attr\[target=", nodes))}  # tensors baked into the module


def inductor_code(code: str) -> dict[str, Any]:
    cpp = re.findall(r"^(cpp_fused_\w+) = async_compile\.cpp", code, re.M)
    triton = re.findall(r"^(triton_\w+) = async_compile\.triton", code, re.M)
    extern = Counter(re.findall(r"extern_kernels\.(\w+)", code))
    return {"kernels": len(cpp) + len(triton), "cpp_kernels": cpp, "triton_kernels": triton,
            "extern_calls": dict(extern), "lines": code.count("\n")}


def compare(a: dict[str, int], b: dict[str, int]) -> list[tuple[str, int, int]]:
    """Rows (op, count in a, count in b), ops differing first, then by total count."""
    ops = set(a) | set(b)
    return sorted(((op, a.get(op, 0), b.get(op, 0)) for op in ops),
                  key=lambda r: (r[1] == r[2], -(r[1] + r[2]), r[0]))


COLLECTIVES = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute",
               "collective-broadcast")
_HLO_SHAPE = re.compile(r"\b(pred|s8|s16|s32|s64|u8|u16|u32|u64|f16|bf16|f32|f64|c64|c128)\[([0-9,]*)\]")
_HLO_BYTES = {"pred": 1, "s8": 1, "u8": 1, "s16": 2, "u16": 2, "f16": 2, "bf16": 2, "s32": 4, "u32": 4, "f32": 4,
              "s64": 8, "u64": 8, "f64": 8, "c64": 8, "c128": 16}


def _result_bytes(line: str) -> int:
    """Bytes of an instruction's result (every array of a tuple), from its text."""
    rhs = line.split("=", 1)[1]
    end = rhs.find("(") if not rhs.lstrip().startswith("(") else None
    if end is None:  # a tuple: up to the matching parenthesis
        depth = 0
        for i, ch in enumerate(rhs):
            depth += ch == "("
            depth -= ch == ")"
            if depth == 0 and ch == ")":
                end = i
                break
    total = 0
    for dtype, dims in _HLO_SHAPE.findall(rhs[: end or 0]):
        n = 1
        for d in filter(None, dims.split(",")):
            n *= int(d)
        total += n * _HLO_BYTES[dtype]
    return total


def collectives(text: str) -> dict[str, dict[str, int]]:
    """The collectives of an optimized (SPMD-partitioned) HLO module: per kind, how many
    instructions and the bytes of their results per device (an all-reduce's buffer, an
    all-gather's gathered array, a reduce-scatter's shard). Asynchronous pairs count once,
    at their ``-start`` (whose result tuple holds the operand too: counted as its larger half
    would be guesswork, so the ``-done``'s result is used instead). A count is static: an
    instruction inside a loop body runs once per iteration."""
    out: dict[str, dict[str, int]] = {}
    for line in text.splitlines():
        op = _hlo_opcode(line)
        if op is None:
            continue
        if op.endswith("-start") and op[:-6] in COLLECTIVES:
            out.setdefault(op[:-6], {"count": 0, "bytes": 0})["count"] += 1
        elif op.endswith("-done") and op[:-5] in COLLECTIVES:
            out.setdefault(op[:-5], {"count": 0, "bytes": 0})["bytes"] += _result_bytes(line)
        elif op in COLLECTIVES:
            entry = out.setdefault(op, {"count": 0, "bytes": 0})
            entry["count"] += 1
            entry["bytes"] += _result_bytes(line)
    return out
