"""The control-flow workloads in PyTorch: small modules whose forward is the loop or the
branch, in the implementation the config names (see the package docstring)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from stackwars.errors import Unsupported
from stackwars.workloads.loops import NEWTON_FIXED_ITERS, NEWTON_MAX_ITERS
from stackwars.workloads.torch_util import sq_error


def _hop(name: str):
    """torch._higher_order_ops.scan / while_loop, where the installed PyTorch has them."""
    try:
        if name == "scan":
            from torch._higher_order_ops.scan import scan
            return scan
        from torch._higher_order_ops.while_loop import while_loop
        return while_loop
    except ImportError as exc:
        raise Unsupported(f"PyTorch {torch.__version__} has no {name} operator ({exc})") from None


class LoopModule(nn.Module):
    def __init__(self, cfg, params):
        super().__init__()
        self.cfg = cfg
        for k, v in params.items():
            setattr(self, k, nn.Parameter(v))

    def run_step(self, step, *args):
        """One step, rematerialised in the backward pass when cfg.remat."""
        if self.cfg.remat and torch.is_grad_enabled():
            return checkpoint(step, *args, use_reentrant=False)
        return step(*args)

    def loop(self, step, h, xs):
        """h <- step(h, x_t) for t < n; ``xs`` [n, ...] (or None: nothing per step)."""
        cfg = self.cfg
        n = cfg.n
        if cfg.impl == "python":
            for t in range(n):
                h = self.run_step(step, h, xs[t]) if xs is not None else self.run_step(step, h)
            return h
        if xs is None:  # the operators take tensors to iterate over
            xs = torch.zeros(n, 1, dtype=h.dtype, device=h.device)
            plain = step
            step = lambda h, _: plain(h)  # noqa: E731
        if cfg.impl == "scan":
            scan = _hop("scan")

            def combine(h, x):  # (carry, output): the output must not alias the carry
                h = step(h, x)
                return h, h.clone()

            h, _ = scan(combine, h, xs)
            return h
        if cfg.impl == "while":
            while_loop = _hop("while")
            i0 = torch.zeros((), dtype=torch.int64, device=h.device)
            _, h = while_loop(lambda i, h: i < n, lambda i, h: (i + 1, step(h, xs.index_select(0, i.reshape(1))[0])),
                              (i0, h))
            return h
        raise Unsupported(f"impl={cfg.impl} has no PyTorch form")


class Rnn(LoopModule):
    def step(self, h, x):  # h [B, d], x [B, d]
        return torch.tanh(h @ self.w + x @ self.u + self.b)

    def forward(self, batch):
        xs = batch["x"].transpose(0, 1)  # [n, B, d]
        h = torch.zeros_like(xs[0])
        return self.loop(self.step, h, xs)


class Ode(LoopModule):
    def field(self, x):  # the MLP vector field
        return torch.tanh(x @ self.w1 + self.b1) @ self.w2 + self.b2

    def step(self, x):  # one RK4 step, dt = 1/n
        dt = 1.0 / self.cfg.n
        k1 = self.field(x)
        k2 = self.field(x + 0.5 * dt * k1)
        k3 = self.field(x + 0.5 * dt * k2)
        k4 = self.field(x + dt * k3)
        return x + (dt / 6.0) * (k1 + 2 * k2 + 2 * k3 + k4)

    def forward(self, batch):
        return self.loop(self.step, batch["x0"], None)


class Newton(LoopModule):
    def solve(self, z):
        """y with y^3 + a*y = z, elementwise, by Newton's method (the iteration count is the
        data's); ``fixed``: NEWTON_FIXED_ITERS steps, no test."""
        cfg = self.cfg
        a = 0.5 + F.softplus(self.p)  # [d], > 0: one real root
        y = z / (1.0 + a)
        tol = cfg.tol * torch.clamp(z.abs(), min=1.0)

        def newton(y):
            return y - (y ** 3 + a * y - z) / (3 * y ** 2 + a)

        if cfg.impl == "fixed":
            for _ in range(NEWTON_FIXED_ITERS):
                y = newton(y)
            return y
        if cfg.impl == "python":
            for _ in range(NEWTON_MAX_ITERS):  # the test reads the data on the host: .item()
                if ((y ** 3 + a * y - z).abs() <= tol).all().item():
                    break
                y = newton(y)
            return y
        while_loop = _hop("while")

        def unconverged(i, y):
            return ((y ** 3 + a * y - z).abs() > tol).any() & (i < NEWTON_MAX_ITERS)

        _, y = while_loop(unconverged, lambda i, y: (i + 1, newton(y)),
                          (torch.zeros((), dtype=torch.int64, device=z.device), y))
        return y

    def forward(self, batch):
        y = batch["x"]
        for _ in range(self.cfg.n):  # the layers: a Python loop in every impl
            y = self.solve(y @ self.w)
        return y


class Branch(LoopModule):
    def a(self, h):
        return torch.tanh(h @ self.wa)

    def b(self, h):
        return torch.relu(h @ self.wb) - 0.1

    def choose(self, h):
        impl = self.cfg.impl
        if impl == "python":
            return self.a(h) if h.mean() > 0 else self.b(h)  # `if tensor`: a data-dependent branch
        if impl == "cond":
            return torch.cond(h.mean() > 0, self.a, self.b, (h,))
        return torch.where(h.mean() > 0, self.a(h), self.b(h))  # both sides computed

    def forward(self, batch):
        h = batch["x"]
        for _ in range(self.cfg.n):
            h = self.run_step(self.choose, h)
        return h


MODULES = {"rnn": Rnn, "ode": Ode, "newton": Newton, "branch": Branch}


def build(cfg, params):
    kind = "ode" if "w1" in params else "newton" if "p" in params else "branch" if "wa" in params else "rnn"
    return MODULES[kind](cfg, params)


def canonical(model):
    return {k: v for k, v in model.named_parameters()}


def forward(model, batch):
    return model(batch)


def loss(model, batch):
    return sq_error(model(batch), batch["target"])
