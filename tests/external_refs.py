"""Each model's tiny config against an independent implementation: Hugging Face transformers'
GPT2LMHeadModel, BertForPreTraining (its MLM transform removed: our BERT's MLM head is the
tied decoder and its bias alone), GPTNeoForCausalLM, LlamaForCausalLM,
ViTForImageClassification and ResNetForImageClassification (torchvision, the first choice
for ResNet-50 and ViT, does not import beside the CPU torch 2.13.0 wheel: its C++ operators
fail to register), loaded with the same weights.

For each model and dtype (float64, float32) it computes, in HF and in both of our twins: the
forward output (logits, or BERT's last hidden states), the loss and every parameter's
gradient, and reports max|twin - HF| / max|HF| per tensor. Two twins agreeing with each other
prove nothing about either; this is the check of each against code neither was written from.
In float64 it also reports the JAX twin against the PyTorch twin (``jax-vs-torch``): there they
may differ only in the order of operations (~1e-13), below even HF's float32 parts.

HF computes a few things in float32 whatever the input dtype: its causal-LM loss (so the LM
losses here are the same next-token cross-entropy computed from HF's logits), the eager
softmax of Llama and ViT (so their float64 runs take SDPA's math kernel), Llama's RMSNorm
statistics and GPT-Neo's attention scores (``FLOAT32_IN_HF``: there the float64 comparison
is bounded by float32 rounding, and the caller's tolerance says so).

Run in its own process (JAX's float64 switch is process-wide):

    python tests/external_refs.py gpt2 bert-base ...   # prints JSON: model -> dtype -> twin -> errors
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any, Callable

import numpy as np

# The weights and inputs are the tool's own (seed 0, the default): the token ids include 0,
# BERT's padding index, whose embedding row HF keeps out of the gradient.
FLOAT32_IN_HF = {  # where HF rounds to float32 even for float64 inputs (the float64 check's floor)
    "llama3-8b": "HF's LlamaRMSNorm computes its statistics in float32",
    "gpt-neo-1.3b": "HF's GPT-Neo attention casts queries and keys to float32",
}


def _rules(name: str, cfg: Any) -> list[tuple[str, str, str]]:
    """(canonical regex, HF name template, how): ``T`` transposes a [out, in] Linear to a
    Conv1D's [in, out]; ``=`` copies."""
    L = r"blocks\.(\d+)\."
    if name == "gpt2":
        h = "transformer.h.{0}."
        return [(r"tok_emb\.weight", "transformer.wte.weight", "="), (r"pos_emb\.weight", "transformer.wpe.weight", "="),
                (L + r"norm1\.(weight|bias)", h + "ln_1.{1}", "="), (L + r"norm2\.(weight|bias)", h + "ln_2.{1}", "="),
                (L + r"attn\.o\.weight", h + "attn.c_proj.weight", "T"), (L + r"attn\.o\.bias", h + "attn.c_proj.bias", "="),
                (L + r"mlp\.fc\.weight", h + "mlp.c_fc.weight", "T"), (L + r"mlp\.fc\.bias", h + "mlp.c_fc.bias", "="),
                (L + r"mlp\.proj\.weight", h + "mlp.c_proj.weight", "T"), (L + r"mlp\.proj\.bias", h + "mlp.c_proj.bias", "="),
                (r"final_norm\.(weight|bias)", "transformer.ln_f.{0}", "=")]
        # q, k, v: the three column blocks of c_attn (see _fused)
    if name == "bert-base":
        h = "bert.encoder.layer.{0}."
        return [(r"tok_emb\.weight", "bert.embeddings.word_embeddings.weight", "="),
                (r"pos_emb\.weight", "bert.embeddings.position_embeddings.weight", "="),
                (r"type_emb\.weight", "bert.embeddings.token_type_embeddings.weight", "="),
                (r"emb_norm\.(weight|bias)", "bert.embeddings.LayerNorm.{0}", "="),
                (L + r"attn\.q\.(weight|bias)", h + "attention.self.query.{1}", "="),
                (L + r"attn\.k\.(weight|bias)", h + "attention.self.key.{1}", "="),
                (L + r"attn\.v\.(weight|bias)", h + "attention.self.value.{1}", "="),
                (L + r"attn\.o\.(weight|bias)", h + "attention.output.dense.{1}", "="),
                (L + r"norm1\.(weight|bias)", h + "attention.output.LayerNorm.{1}", "="),
                (L + r"mlp\.fc\.(weight|bias)", h + "intermediate.dense.{1}", "="),
                (L + r"mlp\.proj\.(weight|bias)", h + "output.dense.{1}", "="),
                (L + r"norm2\.(weight|bias)", h + "output.LayerNorm.{1}", "="),
                (r"pooler\.(weight|bias)", "bert.pooler.dense.{0}", "="), (r"mlm_bias", "cls.predictions.bias", "="),
                (r"nsp\.(weight|bias)", "cls.seq_relationship.{0}", "=")]
    if name == "gpt-neo-1.3b":
        h = "transformer.h.{0}."
        return [(r"tok_emb\.weight", "transformer.wte.weight", "="), (r"pos_emb\.weight", "transformer.wpe.weight", "="),
                (L + r"norm1\.(weight|bias)", h + "ln_1.{1}", "="), (L + r"norm2\.(weight|bias)", h + "ln_2.{1}", "="),
                (L + r"attn\.q\.weight", h + "attn.attention.q_proj.weight", "="),
                (L + r"attn\.k\.weight", h + "attn.attention.k_proj.weight", "="),
                (L + r"attn\.v\.weight", h + "attn.attention.v_proj.weight", "="),
                (L + r"attn\.o\.(weight|bias)", h + "attn.attention.out_proj.{1}", "="),
                (L + r"mlp\.fc\.(weight|bias)", h + "mlp.c_fc.{1}", "="),
                (L + r"mlp\.proj\.(weight|bias)", h + "mlp.c_proj.{1}", "="),
                (r"final_norm\.(weight|bias)", "transformer.ln_f.{0}", "=")]
    if name == "llama3-8b":
        h = "model.layers.{0}."
        return [(r"tok_emb\.weight", "model.embed_tokens.weight", "="), (r"lm_head\.weight", "lm_head.weight", "="),
                (L + r"norm1\.weight", h + "input_layernorm.weight", "="),
                (L + r"norm2\.weight", h + "post_attention_layernorm.weight", "="),
                *((L + rf"attn\.{a}\.weight", h + f"self_attn.{a}_proj.weight", "=") for a in "qkvo"),
                *((L + rf"mlp\.{a}\.weight", h + f"mlp.{a}_proj.weight", "=") for a in ("gate", "up", "down")),
                (r"final_norm\.weight", "model.norm.weight", "=")]
    if name == "vit-b16":
        h = "vit.layers.{0}."
        return [(r"patch\.(weight|bias)", "vit.embeddings.patch_embeddings.projection.{0}", "="),
                (r"cls", "vit.embeddings.cls_token", "="), (r"pos", "vit.embeddings.position_embeddings", "="),
                (L + r"norm1\.(weight|bias)", h + "layernorm_before.{1}", "="),
                (L + r"norm2\.(weight|bias)", h + "layernorm_after.{1}", "="),
                *((L + rf"attn\.{a}\.(weight|bias)", h + f"attention.{a}_proj.{{1}}", "=") for a in "qkvo"),
                (L + r"mlp\.fc\.(weight|bias)", h + "mlp.fc1.{1}", "="),
                (L + r"mlp\.proj\.(weight|bias)", h + "mlp.fc2.{1}", "="),
                (r"final_norm\.(weight|bias)", "vit.layernorm.{0}", "="), (r"head\.(weight|bias)", "classifier.{0}", "=")]
    if name == "resnet50":
        s = "resnet.encoder.stages.{0}.layers.{1}."
        stat = r"(weight|bias|running_mean|running_var)"
        return [(r"conv1\.weight", "resnet.embedder.embedder.convolution.weight", "="),
                (r"bn1\." + stat, "resnet.embedder.embedder.normalization.{0}", "="),
                *((rf"layer(\d)\.(\d+)\.conv{k}\.weight", s + f"layer.{k - 1}.convolution.weight", "=") for k in (1, 2, 3)),
                *((rf"layer(\d)\.(\d+)\.bn{k}\." + stat, s + f"layer.{k - 1}.normalization.{{2}}", "=")
                  for k in (1, 2, 3)),
                (r"layer(\d)\.(\d+)\.downsample\.0\.weight", s + "shortcut.convolution.weight", "="),
                (r"layer(\d)\.(\d+)\.downsample\.1\." + stat, s + "shortcut.normalization.{2}", "="),
                (r"fc\.(weight|bias)", "classifier.1.{0}", "=")]
    raise KeyError(name)


def _hf_name(name: str, cfg: Any, key: str) -> tuple[str, str]:
    for pattern, template, how in _rules(name, cfg):
        m = re.fullmatch(pattern, key)
        if m:
            groups = list(m.groups())
            if name == "resnet50" and key.startswith("layer"):
                groups[0] = str(int(groups[0]) - 1)  # our layer1..4 are HF's stages 0..3
            return template.format(*groups), how
    raise KeyError(f"{name}: no HF counterpart for {key!r}")


def hf_model(name: str, cfg: Any):
    """The HF model of this tiny config, dropout off, its attention the plain (eager) path."""
    import torch
    import transformers as T

    if name == "gpt2":
        conf = T.GPT2Config(vocab_size=cfg.vocab, n_positions=cfg.max_pos, n_embd=cfg.d_model, n_layer=cfg.n_layers,
                            n_head=cfg.n_heads, n_inner=cfg.d_ff, activation_function="gelu_new",
                            layer_norm_epsilon=cfg.norm_eps, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                            bos_token_id=0, eos_token_id=0)
        return T.GPT2LMHeadModel(conf)
    if name == "bert-base":
        conf = T.BertConfig(vocab_size=cfg.vocab, hidden_size=cfg.d_model, num_hidden_layers=cfg.n_layers,
                            num_attention_heads=cfg.n_heads, intermediate_size=cfg.d_ff, hidden_act="gelu",
                            max_position_embeddings=cfg.max_pos, type_vocab_size=cfg.type_vocab,
                            layer_norm_eps=cfg.norm_eps, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
        model = T.BertForPreTraining(conf)
        model.cls.predictions.transform = torch.nn.Identity()  # our MLM head: the tied decoder and its bias
        return model
    if name == "gpt-neo-1.3b":
        conf = T.GPTNeoConfig(vocab_size=cfg.vocab, max_position_embeddings=cfg.max_pos, hidden_size=cfg.d_model,
                              num_layers=cfg.n_layers, attention_types=[[["global", "local"], cfg.n_layers // 2]],
                              num_heads=cfg.n_heads, intermediate_size=cfg.d_ff, window_size=cfg.local_window,
                              activation_function="gelu_new", layer_norm_epsilon=cfg.norm_eps, resid_dropout=0.0,
                              embed_dropout=0.0, attention_dropout=0.0, bos_token_id=0, eos_token_id=0)
        return T.GPTNeoForCausalLM(conf)
    if name == "llama3-8b":
        conf = T.LlamaConfig(vocab_size=cfg.vocab, hidden_size=cfg.d_model, intermediate_size=cfg.d_ff,
                             num_hidden_layers=cfg.n_layers, num_attention_heads=cfg.n_heads,
                             num_key_value_heads=cfg.kv_heads, rms_norm_eps=cfg.norm_eps, max_position_embeddings=64,
                             rope_theta=cfg.rope_theta, tie_word_embeddings=False, attention_bias=False,
                             rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                           "high_freq_factor": 4.0, "original_max_position_embeddings": 8192},
                             bos_token_id=0, eos_token_id=0, pad_token_id=None)
        return T.LlamaForCausalLM(conf)
    if name == "vit-b16":
        conf = T.ViTConfig(hidden_size=cfg.d_model, num_hidden_layers=cfg.n_layers, num_attention_heads=cfg.n_heads,
                           intermediate_size=cfg.d_ff, hidden_act="gelu", image_size=cfg.image, patch_size=cfg.patch,
                           num_channels=cfg.channels, num_labels=cfg.classes, layer_norm_eps=cfg.norm_eps,
                           qkv_bias=True, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
        return T.ViTForImageClassification(conf)
    if name == "resnet50":
        conf = T.ResNetConfig(num_channels=3, embedding_size=cfg.width,
                              hidden_sizes=[cfg.width * 4 * 2 ** i for i in range(4)], depths=list(cfg.blocks),
                              layer_type="bottleneck", hidden_act="relu", downsample_in_first_stage=False,
                              num_labels=cfg.classes)
        return T.ResNetForImageClassification(conf)
    raise KeyError(name)


def _set_attention(model, implementation: str) -> None:
    """Every attention of the model on one of HF's paths: ``eager`` (its own arithmetic) or
    ``sdpa`` (PyTorch's fused entry point, the math kernel on the CPU)."""
    for m in [model, *model.modules()]:
        conf = getattr(m, "config", None)
        if conf is not None and hasattr(conf, "_attn_implementation"):
            try:
                conf._attn_implementation = implementation
            except Exception:  # noqa: BLE001 - a read-only property in some versions
                pass


# float64 runs take SDPA where HF's eager path would compute its softmax in float32 (Llama,
# ViT); GPT-Neo has only its eager path
SDPA_IN_FLOAT64 = ("llama3-8b", "vit-b16")


def load(name: str, cfg: Any, model, canonical: dict[str, np.ndarray], dtype) -> None:
    """Our canonical tensors into the HF model (GPT-2's q, k and v into c_attn's three blocks)."""
    import torch

    sd = {}
    fused: dict[str, list] = {}
    for key, value in canonical.items():
        t = torch.from_numpy(np.asarray(value, dtype=np.float64)).to(dtype)
        m = re.fullmatch(r"blocks\.(\d+)\.attn\.([qkv])\.(weight|bias)", key)
        if name == "gpt2" and m:
            fused.setdefault(f"transformer.h.{m.group(1)}.attn.c_attn.{m.group(3)}", [None] * 3)[
                "qkv".index(m.group(2))] = t.T if m.group(3) == "weight" else t
            continue
        hf, how = _hf_name(name, cfg, key)
        sd[hf] = t.T.contiguous() if how == "T" else t
    for hf, parts in fused.items():
        sd[hf] = torch.cat(parts, dim=-1).contiguous()
    missing, unexpected = model.load_state_dict(sd, strict=False)
    missing = [k for k in missing if not k.endswith(("num_batches_tracked", "position_ids", "masked_bias", ".bias"))
               or k in sd]
    # what HF holds and our canonical layout does not: tied weights and fixed buffers only
    tied = {"lm_head.weight", "cls.predictions.decoder.weight", "cls.predictions.decoder.bias"}
    left = [k for k in missing if k not in tied and "rotary" not in k and not k.endswith(".attn.bias")]
    if left or unexpected:
        raise AssertionError(f"{name}: HF parameters not loaded {left}, unexpected {unexpected}")


def grads(name: str, cfg: Any, model, keys) -> dict[str, np.ndarray]:
    """HF's gradients under our canonical names."""
    named = dict(model.named_parameters())
    out = {}
    for key in keys:
        if key.endswith(("running_mean", "running_var")):
            continue
        m = re.fullmatch(r"blocks\.(\d+)\.attn\.([qkv])\.(weight|bias)", key)
        if name == "gpt2" and m:
            g = named[f"transformer.h.{m.group(1)}.attn.c_attn.{m.group(3)}"].grad
            d = cfg.d_model
            block = g[..., "qkv".index(m.group(2)) * d:("qkv".index(m.group(2)) + 1) * d]
            out[key] = (block.T if m.group(3) == "weight" else block).detach().double().numpy()
            continue
        hf, how = _hf_name(name, cfg, key)
        g = named[hf].grad
        out[key] = (g.T if how == "T" else g).detach().double().numpy()
    return out


def hf_run(name: str, cfg: Any, params: dict[str, np.ndarray], batch: dict[str, np.ndarray], dtype) -> dict:
    """HF's forward output (eval mode), loss and gradients (train mode) in ``dtype``."""
    import torch

    import torch as _torch
    model = hf_model(name, cfg)
    _set_attention(model, "sdpa" if dtype == _torch.float64 and name in SDPA_IN_FLOAT64 else "eager")
    model = model.to(dtype)
    load(name, cfg, model, params, dtype)
    tb = {k: torch.from_numpy(v) if np.issubdtype(v.dtype, np.integer) else torch.from_numpy(v.astype(np.float64))
          .to(dtype) for k, v in batch.items()}

    def run(train: bool):
        model.train(train)
        if name in ("gpt2", "gpt-neo-1.3b", "llama3-8b"):
            logits = model(input_ids=tb["ids"]).logits
            if not train:
                return logits
            # next-token cross-entropy, as HF's own loss defines it, but in the logits' dtype:
            # HF's ForCausalLMLoss casts the logits to float32 first, which would cap the
            # float64 comparison at float32's precision
            return torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]),
                                                     tb["ids"][:, 1:].reshape(-1))
        if name == "bert-base":
            if not train:
                return model.bert(input_ids=tb["ids"], token_type_ids=tb["types"]).last_hidden_state
            return model(input_ids=tb["ids"], token_type_ids=tb["types"], labels=tb["labels"],
                         next_sentence_label=tb["nsp"]).loss
        logits = model(pixel_values=tb["images"]).logits
        return torch.nn.functional.cross_entropy(logits, tb["labels"]) if train else logits

    with torch.no_grad():
        out = {"out": run(False).detach().double().numpy()}
    load(name, cfg, model, params, dtype)  # BatchNorm statistics as they were before
    loss = run(True)
    loss.backward()
    out["loss"] = loss.detach().double().numpy()
    out.update({f"grad.{k}": v for k, v in grads(name, cfg, model, params).items()})
    return out


def torch_twin(wl, cfg, params, batch, dtype) -> dict:
    import torch

    from stackwars.workloads.models import torch_nets

    model = torch_nets.build(cfg, {k: torch.from_numpy(np.asarray(v, np.float64)).to(dtype) for k, v in params.items()})
    tb = {k: torch.from_numpy(v) if np.issubdtype(v.dtype, np.integer) else torch.from_numpy(v.astype(np.float64))
          .to(dtype) for k, v in batch.items()}
    model.eval()
    with torch.no_grad():
        out = {"out": model(tb).double().numpy()}
    model.train()
    loss = model(tb, loss=True)
    loss.backward()
    out["loss"] = loss.detach().double().numpy()
    out.update({f"grad.{n}": p.grad.double().numpy() for n, p in model.named_parameters()})
    return out


def jax_twin(wl, cfg, params, batch, dtype) -> dict:
    import jax
    import jax.numpy as jnp

    from stackwars.backends.jax_common import build_twin

    jd = {"float64": jnp.float64, "float32": jnp.float32}[dtype]
    twin = wl.twin("jax")
    hb = twin.host_batch(cfg, batch)
    jb = {k: jnp.asarray(v) if np.issubdtype(v.dtype, np.integer) else jnp.asarray(v, jd) for k, v in hb.items()}
    static, tree = build_twin(twin, cfg, params, lambda v: jnp.asarray(np.asarray(v, jd)))
    out = {"out": np.asarray(jax.jit(lambda t, b: twin.forward(static, t, b))(tree, jb), np.float64)}
    p, rest = twin.partition(static, tree)
    (loss, _), (g, _) = jax.jit(jax.value_and_grad(lambda p, r: twin.loss_and_state(static, p, r, jb),
                                                   argnums=(0, 1), has_aux=True))(p, rest)
    out["loss"] = np.asarray(loss, np.float64)
    g = jax.tree.map(np.asarray, g)  # into the canonical layout on the host: no program per kernel shape
    out.update({f"grad.{k}": np.asarray(v, np.float64) for k, v in twin.canonical(static, (g,)).items()})
    return out


def rel(a, b, floor: float = 0.0) -> float:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if a.shape != b.shape:
        raise AssertionError(f"shape {a.shape} against HF's {b.shape}")
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), floor, 1e-300))


def compare(name: str, dtypes=("float64", "float32"), seed: int = 0) -> dict[str, dict[str, dict[str, float]]]:
    import jax
    import torch

    from stackwars import registry

    jax.config.update("jax_enable_x64", True)
    wl = registry.workload(name)
    cfg = wl.config("tiny", {})
    params, batch = wl.init(cfg, seed)
    result: dict[str, dict[str, dict[str, float]]] = {}
    for dtype in dtypes:
        tdt = {"float64": torch.float64, "float32": torch.float32}[dtype]
        ref = hf_run(name, cfg, params, batch, tdt)
        # a gradient that is zero in exact arithmetic (a key bias under softmax) is compared
        # against the model's gradients as a whole, not against its own rounding noise
        floor = 1e-3 * max(np.max(np.abs(v)) for k, v in ref.items() if k.startswith("grad."))
        twins: dict[str, Callable] = {"torch": lambda: torch_twin(wl, cfg, params, batch, tdt),
                                      "jax": lambda: jax_twin(wl, cfg, params, batch, dtype)}
        result[dtype] = {}
        got = {}
        for tname, fn in twins.items():
            got[tname] = fn()
            missing = sorted(set(ref) - set(got[tname]))
            if missing:
                raise AssertionError(f"{name} {tname} twin lacks {missing}")
            result[dtype][tname] = {k: rel(got[tname][k], v, floor if k.startswith("grad.") else 0.0)
                                    for k, v in ref.items()}
        if dtype == "float64":  # the twins against each other, where HF's float32 parts do not bound it
            result[dtype]["jax-vs-torch"] = {k: rel(got["jax"][k], got["torch"][k],
                                                    floor if k.startswith("grad.") else 0.0) for k in ref}
    return result


if __name__ == "__main__":
    import os
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    print(json.dumps({name: compare(name) for name in sys.argv[1:]}))
