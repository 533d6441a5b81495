"""The canonical tensors of every model (the PyTorch twin's ``state_dict`` names and shapes,
in its order), computed from the configuration alone: no framework, nothing allocated.

A JAX cell need not import PyTorch to know its weights' shapes, and ``stackwars describe``
stays instant for any size (``parameter_count`` is arithmetic, never a loop over tensors).
The tests check these against the PyTorch twin built on the meta device, for every model
and preset.
"""

from __future__ import annotations

from typing import Iterator

from stackwars.workloads.models.config import ResNetConfig, TransformerConfig

Shape = tuple[int, ...]


def _linear(name: str, n_in: int, n_out: int, bias: bool) -> Iterator[tuple[str, Shape]]:
    yield f"{name}.weight", (n_out, n_in)
    if bias:
        yield f"{name}.bias", (n_out,)


def _norm(cfg: TransformerConfig, name: str) -> Iterator[tuple[str, Shape]]:
    yield f"{name}.weight", (cfg.d_model,)
    if cfg.norm == "layernorm":
        yield f"{name}.bias", (cfg.d_model,)


def block_shapes(cfg: TransformerConfig, prefix: str) -> Iterator[tuple[str, Shape]]:
    d, hd = cfg.d_model, cfg.d_head
    yield from _norm(cfg, f"{prefix}.norm1")
    yield from _linear(f"{prefix}.attn.q", d, cfg.n_heads * hd, cfg.qkv_bias)
    yield from _linear(f"{prefix}.attn.k", d, cfg.kv_heads * hd, cfg.qkv_bias)
    yield from _linear(f"{prefix}.attn.v", d, cfg.kv_heads * hd, cfg.qkv_bias)
    yield from _linear(f"{prefix}.attn.o", cfg.n_heads * hd, d, cfg.bias)
    yield from _norm(cfg, f"{prefix}.norm2")
    if cfg.mlp == "swiglu":
        yield from _linear(f"{prefix}.mlp.gate", d, cfg.d_ff, False)
        yield from _linear(f"{prefix}.mlp.up", d, cfg.d_ff, False)
        yield from _linear(f"{prefix}.mlp.down", cfg.d_ff, d, False)
    else:
        yield from _linear(f"{prefix}.mlp.fc", d, cfg.d_ff, cfg.bias)
        yield from _linear(f"{prefix}.mlp.proj", cfg.d_ff, d, cfg.bias)


def _outside_blocks(cfg: TransformerConfig) -> tuple[list[tuple[str, Shape]], list[tuple[str, Shape]]]:
    """Tensors before and after the blocks, in state_dict order (a module's own parameters
    come before its submodules')."""
    d = cfg.d_model
    before: list[tuple[str, Shape]] = []
    if cfg.kind == "vit":
        before += [("cls", (1, 1, d)), ("pos", (1, cfg.tokens, d))]
    if cfg.kind == "encoder":
        before.append(("mlm_bias", (cfg.vocab,)))
    if cfg.kind == "vit":
        before += [("patch.weight", (d, cfg.channels, cfg.patch, cfg.patch)), ("patch.bias", (d,))]
    else:
        before.append(("tok_emb.weight", (cfg.vocab, d)))
        if cfg.positions == "learned":
            before.append(("pos_emb.weight", (cfg.max_pos, d)))
        if cfg.type_vocab:
            before.append(("type_emb.weight", (cfg.type_vocab, d)))
    if not cfg.prenorm:
        before += list(_norm(cfg, "emb_norm"))
    after: list[tuple[str, Shape]] = []
    if cfg.final_norm:
        after += list(_norm(cfg, "final_norm"))
    if cfg.kind == "lm" and not cfg.tie_embeddings:
        after += list(_linear("lm_head", d, cfg.vocab, False))
    if cfg.kind == "vit":
        after += list(_linear("head", d, cfg.classes, True))
    if cfg.kind == "encoder":
        after += list(_linear("pooler", d, d, True)) + list(_linear("nsp", d, 2, True))
    return before, after


def _size(shape: Shape) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def transformer_shapes(cfg: TransformerConfig) -> dict[str, Shape]:
    before, after = _outside_blocks(cfg)
    blocks = [item for i in range(cfg.n_layers) for item in block_shapes(cfg, f"blocks.{i}")]
    return dict(before + blocks + after)


def transformer_counts(cfg: TransformerConfig) -> tuple[int, int]:
    """(parameters, tensors) without listing every layer: arithmetic in the layer count."""
    before, after = _outside_blocks(cfg)
    layer = list(block_shapes(cfg, "b"))
    params = sum(_size(s) for _, s in before + after) + cfg.n_layers * sum(_size(s) for _, s in layer)
    return params, len(before) + len(after) + cfg.n_layers * len(layer)


def _bn(name: str, c: int) -> Iterator[tuple[str, Shape]]:
    for part in ("weight", "bias", "running_mean", "running_var"):
        yield f"{name}.{part}", (c,)


def resnet_layout(cfg: ResNetConfig) -> Iterator[tuple[str, Shape]]:
    w = cfg.width
    yield "conv1.weight", (w, 3, 7, 7)
    yield from _bn("bn1", w)
    inplanes = w
    for i, (n, stride) in enumerate(zip(cfg.blocks, (1, 2, 2, 2))):
        planes = w * 2 ** i
        for j in range(int(n)):
            p = f"layer{i + 1}.{j}"
            s = stride if j == 0 else 1
            yield f"{p}.conv1.weight", (planes, inplanes, 1, 1)
            yield from _bn(f"{p}.bn1", planes)
            yield f"{p}.conv2.weight", (planes, planes, 3, 3)
            yield from _bn(f"{p}.bn2", planes)
            yield f"{p}.conv3.weight", (planes * 4, planes, 1, 1)
            yield from _bn(f"{p}.bn3", planes * 4)
            if s != 1 or inplanes != planes * 4:
                yield f"{p}.downsample.0.weight", (planes * 4, inplanes, 1, 1)
                yield from _bn(f"{p}.downsample.1", planes * 4)
            inplanes = planes * 4
    yield from _linear("fc", inplanes, cfg.classes, True)


def canonical_shapes(cfg) -> dict[str, Shape]:
    """Every canonical tensor (BatchNorm running statistics included), in state_dict order."""
    if isinstance(cfg, ResNetConfig):
        return dict(resnet_layout(cfg))
    return transformer_shapes(cfg)


def counts(cfg) -> tuple[int, int]:
    """(trainable parameters, canonical tensors); BatchNorm's running statistics are state:
    tensors, not parameters."""
    if isinstance(cfg, ResNetConfig):
        layout = list(resnet_layout(cfg))
        params = sum(_size(s) for n, s in layout if not n.endswith(("running_mean", "running_var")))
        return params, len(layout)
    return transformer_counts(cfg)
