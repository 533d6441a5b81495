"""ffn in PyTorch: Linear -> GELU -> Linear."""

from torch import nn

from stackwars.workloads.torch_util import linear, linear_canonical, sq_error


class Ffn(nn.Module):
    def __init__(self, cfg, params):
        super().__init__()
        self.fc1 = linear(params["w1"], params["b1"])  # d -> h
        self.act = nn.GELU(approximate="tanh" if cfg.activation == "gelu-tanh" else "none")
        self.fc2 = linear(params["w2"], params["b2"])  # h -> d
        self.flat = cfg.layout == "flat"

    def forward(self, x):  # x: [B, T, d]
        if self.flat:
            return self.fc2(self.act(self.fc1(x.reshape(-1, x.shape[-1])))).view(x.shape)  # via [B*T, d]
        return self.fc2(self.act(self.fc1(x)))  # [B, T, h] -> [B, T, d]


def build(cfg, params):
    return Ffn(cfg, params)


def canonical(model):
    return {**linear_canonical(model.fc1, "w1", "b1"), **linear_canonical(model.fc2, "w2", "b2")}


def forward(model, batch):
    return model(batch["x"])


def loss(model, batch):
    return sq_error(model(batch["x"]), batch["target"])
