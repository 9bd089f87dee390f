"""A GPU-sized fused-operator pool written for this project, in KernelBench format (Ops-6K style: conv,
GEMM, normalisation, activation and reduction combinations), each operator template at three sizes
chosen for an eager runtime of about 1-30 ms on an H200 in fp32; plus a few deliberately degenerate
tasks that vetting must reject.

    python -m evalsvc.pools.builtin OUTDIR    # writes them in our folder format (task.py per folder)
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

from evalsvc.core.pools import PoolSource
from evalsvc.pools.importers import Candidate, PoolReader, _tags

HEADER = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n\n"

# name -> (Model source, get_inputs/get_init_inputs source, sizes); {placeholders} filled per size.
TEMPLATES: dict[str, tuple[str, str, list[dict[str, int]]]] = {
    "gemm_bias_relu": (
        '''class Model(nn.Module):
    """nn.Linear (x @ W^T + b) followed by ReLU."""

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.linear(x))
''',
        """def get_inputs():
    return [torch.randn({M}, {K})]


def get_init_inputs():
    return [{K}, {N}]
""",
        [dict(M=4096, K=4096, N=4096), dict(M=8192, K=4096, N=4096), dict(M=8192, K=8192, N=8192)],
    ),
    "gemm_gelu_scale_residual": (
        '''class Model(nn.Module):
    """GELU(x @ W^T + b) * scale + x."""

    def __init__(self, features: int, scale: float):
        super().__init__()
        self.linear = nn.Linear(features, features)
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(self.linear(x)) * self.scale + x
''',
        """def get_inputs():
    return [torch.randn({M}, {K})]


def get_init_inputs():
    return [{K}, 0.5]
""",
        [dict(M=4096, K=4096), dict(M=8192, K=4096), dict(M=16384, K=4096)],
    ),
    "conv2d_relu_bias": (
        '''class Model(nn.Module):
    """3x3 convolution, ReLU, then a per-channel bias."""

    def __init__(self, cin: int, cout: int):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 3, padding=1)
        self.bias = nn.Parameter(torch.randn(cout, 1, 1) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.conv(x)) + self.bias
''',
        """def get_inputs():
    return [torch.randn({B}, {C}, {H}, {H})]


def get_init_inputs():
    return [{C}, {D}]
""",
        [dict(B=16, C=64, D=128, H=128), dict(B=32, C=64, D=128, H=128), dict(B=32, C=128, D=128, H=128)],
    ),
    "conv2d_batchnorm_silu": (
        '''class Model(nn.Module):
    """3x3 convolution, batch norm (inference statistics), SiLU."""

    def __init__(self, cin: int, cout: int):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(cout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.silu(self.bn(self.conv(x)))
''',
        """def get_inputs():
    return [torch.randn({B}, {C}, {H}, {H})]


def get_init_inputs():
    return [{C}, {D}]
""",
        [dict(B=16, C=32, D=64, H=256), dict(B=32, C=32, D=64, H=256), dict(B=32, C=64, D=64, H=256)],
    ),
    "layernorm_gelu": (
        '''class Model(nn.Module):
    """LayerNorm over the last dimension, then GELU."""

    def __init__(self, features: int):
        super().__init__()
        self.norm = nn.LayerNorm(features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(self.norm(x))
''',
        """def get_inputs():
    return [torch.randn({M}, {K})]


def get_init_inputs():
    return [{K}]
""",
        [dict(M=16384, K=8192), dict(M=32768, K=8192), dict(M=65536, K=8192)],
    ),
    "scaled_softmax": (
        '''class Model(nn.Module):
    """softmax(x * scale) over the last dimension."""

    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x * self.scale, dim=-1)
''',
        """def get_inputs():
    return [torch.randn({M}, {K})]


def get_init_inputs():
    return [0.125]
""",
        [dict(M=8192, K=16384), dict(M=16384, K=16384), dict(M=32768, K=16384)],
    ),
    "rmsnorm_swiglu": (
        '''class Model(nn.Module):
    """RMSNorm of x, then SiLU(norm * w) * gate."""

    def __init__(self, features: int):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(features))
        self.eps = 1e-6

    def forward(self, x: torch.Tensor, gate: torch.Tensor) -> torch.Tensor:
        norm = x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps)
        return F.silu(norm * self.weight) * gate
''',
        """def get_inputs():
    return [torch.randn({M}, {K}), torch.randn({M}, {K})]


def get_init_inputs():
    return [{K}]
""",
        [dict(M=8192, K=8192), dict(M=16384, K=8192), dict(M=32768, K=8192)],
    ),
    "matmul_logsumexp": (
        '''class Model(nn.Module):
    """(A @ B), then logsumexp over the last dimension."""

    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.logsumexp(a @ b, dim=-1)
''',
        """def get_inputs():
    return [torch.randn({M}, {K}), torch.randn({K}, {N}) * 0.05]


def get_init_inputs():
    return []
""",
        [dict(M=4096, K=4096, N=4096), dict(M=8192, K=4096, N=8192), dict(M=16384, K=4096, N=8192)],
    ),
    "spatial_softmax_pool_relu": (
        '''class Model(nn.Module):
    """Softmax-weighted spatial pooling per channel (attention pooling over H*W), then ReLU."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        flat = x.flatten(2)
        weights = torch.softmax(flat, dim=-1)
        return torch.relu((weights * flat).sum(dim=-1))
''',
        """def get_inputs():
    return [torch.randn({B}, {C}, {H}, {H})]


def get_init_inputs():
    return []
""",
        [dict(B=32, C=256, H=128), dict(B=64, C=256, H=128), dict(B=128, C=256, H=128)],
    ),
    "attention_bmm_softmax_bmm": (
        '''class Model(nn.Module):
    """Scaled dot-product attention written out: softmax(Q K^T / sqrt(d)) V."""

    def __init__(self):
        super().__init__()

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        scores = torch.bmm(q, k.transpose(1, 2)) / (q.shape[-1] ** 0.5)
        return torch.bmm(torch.softmax(scores, dim=-1), v)
''',
        """def get_inputs():
    return [torch.randn({B}, {L}, {D}), torch.randn({B}, {L}, {D}), torch.randn({B}, {L}, {D})]


def get_init_inputs():
    return []
""",
        [dict(B=64, L=2048, D=64), dict(B=128, L=2048, D=64), dict(B=64, L=4096, D=64)],
    ),
}

# Degenerate on purpose: vetting must reject each one for the reason in its name.
DEGENERATE: dict[str, str] = {
    "degenerate_constant_output": '''class Model(nn.Module):
    """Ignores its input."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ones_like(x) * 3.0


def get_inputs():
    return [torch.randn(4096, 4096)]


def get_init_inputs():
    return []
''',
    "degenerate_random_output": '''class Model(nn.Module):
    """Adds fresh noise on every call (hidden randomness)."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x) + torch.randn_like(x)


def get_inputs():
    return [torch.randn(4096, 4096)]


def get_init_inputs():
    return []
''',
    "degenerate_too_fast": '''class Model(nn.Module):
    """A ReLU of a few thousand elements: launch overhead, not work."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


def get_inputs():
    return [torch.randn(64, 64)]


def get_init_inputs():
    return []
''',
}


def _source(name: str, size: dict[str, int]) -> str:
    model, io, _ = TEMPLATES[name]
    return HEADER + model + "\n\n" + io.format(**size)


def _size_label(size: dict[str, int]) -> str:
    return "_".join(f"{k}{v}" for k, v in size.items())


def builtin_sources() -> Iterator[tuple[str, str]]:
    """(name, source) of every builtin task: the smallest size of every template first, then the next
    size of each, ...; then the degenerate ones."""
    for i in range(max(len(sizes) for _, _, sizes in TEMPLATES.values())):
        for name, (_, _, sizes) in TEMPLATES.items():
            if i < len(sizes):
                yield f"{name}/{_size_label(sizes[i])}", _source(name, sizes[i])
    for name, body in DEGENERATE.items():
        yield name, HEADER + body


def read_builtin() -> PoolReader:
    items = list(builtin_sources())

    def candidates() -> Iterator[Candidate]:
        for name, source in items:
            kind = "degenerate" if name.startswith("degenerate_") else "fused"
            yield Candidate(
                name=f"builtin/{name}",
                origin=f"evalsvc.pools.builtin:{name}",
                source=source,
                tags=_tags(source, level="2", kind=kind),
            )

    return PoolReader(PoolSource.FOLDER, len(items), candidates())


def write_folder(out: Path) -> int:
    """Write the builtin pool in our folder format (importable with `evalsvc tasks import OUT`)."""
    n = 0
    for name, source in builtin_sources():
        d = out / name
        d.mkdir(parents=True, exist_ok=True)
        (d / "task.py").write_text(source)
        n += 1
    return n


if __name__ == "__main__":
    count = write_folder(Path(sys.argv[1]))
    sys.stdout.write(f"wrote {count} tasks under {sys.argv[1]}\n")
