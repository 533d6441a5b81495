"""Model configurations: one generic transformer config (five published models are
presets of it) and the ResNet config. Frameworks are not imported here."""

from __future__ import annotations

from dataclasses import dataclass

from stackwars.errors import SpecError
from stackwars.workloads.attention import CHOICES as ATTENTION
from stackwars.workloads.base import Config, bounded, choices


@dataclass(frozen=True)
class TransformerConfig(Config):
    kind: str = choices("lm", "encoder", "vit", default="lm")  # causal LM / BERT-style encoder / ViT
    d_model: int = 64
    n_layers: int = 2
    n_heads: int = 4
    d_ff: int = 256
    batch: int = 2
    seq: int = 16  # tokens per sequence (lm, encoder); ViT: derived from image / patch
    vocab: int | None = None
    n_kv_heads: int | None = None  # grouped-query attention (Llama 3); None = n_heads
    max_pos: int | None = None  # learned position table; None with RoPE
    type_vocab: int | None = None  # BERT token types
    # BERT's padding token: its embedding row gets no gradient from the lookup (a token id: 0 allowed)
    pad_id: int | None = bounded(None, low=0, low_open=False)
    image: int | None = None  # ViT
    patch: int | None = None
    classes: int | None = None
    channels: int | None = None
    norm: str = choices("layernorm", "rmsnorm", default="layernorm")
    norm_eps: float = bounded(1e-5, low=0, why="an epsilon inside a square root")
    prenorm: bool = True  # False: BERT's post-LN
    final_norm: bool = True
    positions: str = choices("learned", "rope", default="learned")
    rope_theta: float = bounded(10000.0, low=0, why="RoPE's base wavelength")
    rope_scaling: str = choices("none", "llama3", default="none")  # Llama 3.1's frequency scaling
    mlp: str = choices("gelu", "swiglu", default="gelu")
    gelu: str = choices("tanh", "erf", default="tanh")
    bias: bool = True  # biases of the output projection and the MLP
    qkv_bias: bool = True
    attn_scale: bool = True  # GPT-Neo does not scale attention scores by 1/sqrt(d_head)
    local_window: int | None = None  # GPT-Neo: odd layers attend within this window
    tie_embeddings: bool = True
    attention: str = choices(*ATTENTION, default="best")  # see workloads/attention.py

    @property
    def d_head(self) -> int:
        return self.d_model // self.n_heads

    @property
    def kv_heads(self) -> int:
        return self.n_kv_heads or self.n_heads

    @property
    def tokens(self) -> int:
        """Positions per sequence (ViT: patches + the class token)."""
        if self.kind == "vit":
            return (self.image // self.patch) ** 2 + 1
        return self.seq

    def layer_is_local(self, i: int) -> bool:
        return self.local_window is not None and i % 2 == 1

    def validate(self) -> None:
        super().validate()
        if self.d_model % self.n_heads:
            raise SpecError(f"n_heads={self.n_heads} must divide d_model={self.d_model}")
        if self.n_heads % self.kv_heads:
            raise SpecError(f"n_kv_heads={self.kv_heads} must divide n_heads={self.n_heads}")
        if self.positions == "rope" and self.d_head % 2:
            raise SpecError(f"RoPE needs an even head size, got {self.d_head}")
        if self.kind == "vit":
            for f in ("image", "patch", "classes", "channels"):
                if not getattr(self, f):
                    raise SpecError(f"a ViT needs {f}")
            if self.image % self.patch:
                raise SpecError(f"patch={self.patch} must divide image={self.image}")
        else:
            if not self.vocab:
                raise SpecError("a language model needs vocab")
            if self.pad_id is not None and not 0 <= self.pad_id < self.vocab:
                raise SpecError(f"pad_id={self.pad_id} must be a token id, 0 to vocab-1 ({self.vocab - 1})")
            if self.positions == "learned" and (self.max_pos or 0) < self.seq:
                raise SpecError(f"seq={self.seq} exceeds the position table (max_pos={self.max_pos})")


@dataclass(frozen=True)
class ResNetConfig(Config):
    batch: int = 2
    image: int = 32
    classes: int = 10
    width: int = 8  # channels of the stem (ResNet-50: 64)
    blocks: tuple = (1, 1, 1, 1)  # bottlenecks per stage (ResNet-50: 3, 4, 6, 3)
    bn_eps: float = bounded(1e-5, low=0, why="an epsilon inside a square root")
    # PyTorch's convention: new = (1 - m) * old + m * batch
    bn_momentum: float = bounded(0.1, low=0, high=1, low_open=False, why="a weight between the old and the batch "
                                                                         "statistics")

    def validate(self) -> None:
        super().validate()
        if len(self.blocks) != 4 or any(int(b) < 1 for b in self.blocks):
            raise SpecError(f"blocks must be four positive counts, got {self.blocks}")
        if self.image < 32:
            raise SpecError(f"image must be at least 32 pixels (five stride-2 stages), got {self.image}")


def rope_inv_freq(cfg: TransformerConfig):
    """RoPE inverse frequencies in float64 numpy, shared by both twins (Llama 3.1 scaling:
    factor 8, low/high frequency factors 1 and 4, original context 8192)."""
    import numpy as np

    hd = cfg.d_head
    inv = 1.0 / (cfg.rope_theta ** (np.arange(0, hd, 2, dtype=np.float64) / hd))
    if cfg.rope_scaling == "llama3":
        factor, low, high, context = 8.0, 1.0, 4.0, 8192.0
        wavelen = 2 * np.pi / inv
        scaled = np.where(wavelen > context / low, inv / factor, inv)
        smooth = (context / wavelen - low) / (high - low)
        smoothed = (1 - smooth) * scaled / factor + smooth * scaled
        medium = ~(wavelen < context / high) & ~(wavelen > context / low)
        inv = np.where(medium, smoothed, scaled)
    return inv
