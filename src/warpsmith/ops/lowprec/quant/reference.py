"""Low-precision formats and their plain-PyTorch quantization (the single source of truth for both the
scaled GEMM's inputs and the quantization kernels' references).

Convention, everywhere in this family: **multiply to dequantize**, ``real = q * scale``, scales fp32;
a dynamic scale is ``amax / QMAX`` (``amax == 0`` gives scale 1, so an all-zero group stays zero and
no division by zero happens), and quantization is ``q = saturate(round(x / scale))``.

Formats: ``e4m3`` (torch.float8_e4m3fn, max 448, no infinity), ``e5m2`` (torch.float8_e5m2, max
57344), ``int8`` (symmetric, [-127, 127]; -128 is never produced).

Special values (the kernels, kernel.py, do the same; judge.py checks it):

- the cast saturates: ±inf gives ±QMAX in every format (e5m2 too: never inf); NaN stays NaN in fp8 and
  becomes 0 in int8, which has no NaN (torch's own float -> int8 cast of NaN is undefined behaviour;
  ``torch.quantize_per_tensor`` gives 127);
- a group's amax ignores its NaNs: the other values keep their scale (an all-NaN group has amax 0,
  scale 1), the NaN itself quantizes as above;
- an infinity in a group makes its amax, hence its scale, +inf: every finite value of the group then
  quantizes to 0 and the infinity itself to NaN (inf / inf; 0 in int8), so the whole group dequantizes
  to NaN (0 * inf): a group with an infinity cannot be represented with a finite scale, and is not made
  finite silently. A static scale (``quantize_static``) saturates the infinity instead.
"""
from __future__ import annotations

import math

import torch

FORMATS = ("e4m3", "e5m2", "int8")
DTYPE_OF = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2, "int8": torch.int8}
QMAX = {"e4m3": 448.0, "e5m2": 57344.0, "int8": 127.0}
BLOCK = 128  # the block of block scaling: 1x128 on activations, 128x128 on weights (DeepSeek-V3)


def saturate_cast(x: torch.Tensor, fmt: str) -> torch.Tensor:
    """``x`` (float) to format ``fmt``, clamped to [-QMAX, QMAX] (so e4m3 never makes NaN from a
    large finite value, and e5m2 never infinity; ±inf saturates); int8 rounds half to even. NaN stays NaN
    for fp8 and becomes 0 for int8 (stated: torch's cast of NaN to an integer is undefined)."""
    q = QMAX[fmt]
    if fmt == "int8":
        r = torch.round(x.float())
        return torch.where(torch.isnan(r), torch.zeros_like(r), r).clamp(-q, q).to(torch.int8)
    return x.float().clamp(-q, q).to(DTYPE_OF[fmt])


def abs_ignoring_nan(x: torch.Tensor) -> torch.Tensor:
    """``|x|`` in fp32 with NaN as 0: what a group's amax is taken over (a NaN never sets a scale)."""
    a = x.float().abs()
    return torch.where(torch.isnan(a), torch.zeros_like(a), a)


def amax_scale(amax: torch.Tensor, fmt: str) -> torch.Tensor:
    """Dynamic scale ``amax / QMAX`` in fp32, 1 where ``amax == 0`` (+inf where amax is: see the module docstring)."""
    amax = amax.float()
    return torch.where(amax > 0, amax / QMAX[fmt], torch.ones_like(amax))


def quantize_tensor(x: torch.Tensor, fmt: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-tensor: (q, scale of shape (1,))."""
    s = amax_scale(abs_ignoring_nan(x).amax().reshape(1), fmt)
    return saturate_cast(x.float() / s, fmt), s


def quantize_rows(x: torch.Tensor, fmt: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Per row (per token) of a 2-D ``x``: (q, scale of shape (rows, 1))."""
    s = amax_scale(abs_ignoring_nan(x).amax(dim=1, keepdim=True), fmt)
    return saturate_cast(x.float() / s, fmt), s


def quantize_blocks(x: torch.Tensor, fmt: str, block_rows: int, block_cols: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Per (block_rows x block_cols) block of a 2-D ``x`` (partial blocks at the edges): (q, scale of shape
    (ceil(rows / block_rows), ceil(cols / block_cols)))."""
    r, c = x.shape
    rb, cb = -(-r // block_rows), -(-c // block_cols)
    pad = torch.zeros(rb * block_rows, cb * block_cols, dtype=torch.float32, device=x.device)
    pad[:r, :c] = abs_ignoring_nan(x)
    amax = pad.reshape(rb, block_rows, cb, block_cols).amax(dim=(1, 3))
    s = amax_scale(amax, fmt)
    full = s.repeat_interleave(block_rows, 0)[:r].repeat_interleave(block_cols, 1)[:, :c]
    return saturate_cast(x.float() / full, fmt), s


def expand_scale(scale: torch.Tensor, rows: int, cols: int, block_rows: int, block_cols: int) -> torch.Tensor:
    """A block scale grid broadcast to the (rows, cols) elements it scales."""
    return scale.repeat_interleave(block_rows, 0)[:rows].repeat_interleave(block_cols, 1)[:, :cols]


def snr_db(x: torch.Tensor, ref: torch.Tensor) -> float:
    """Signal-to-noise ratio of ``x`` against ``ref`` in dB: 10 log10(sum ref^2 / sum (x - ref)^2)."""
    x, ref = x.double(), ref.double()
    noise = float(((x - ref) ** 2).sum())
    return float("inf") if noise == 0 else 10.0 * math.log10(float((ref ** 2).sum()) / noise)


def calc_diff(x: torch.Tensor, y: torch.Tensor) -> float:
    """DeepGEMM's similarity metric ``1 - 2 sum(x y) / sum(x^2 + y^2)`` (0 when equal)."""
    x, y = x.double(), y.double()
    denom = float((x * x + y * y).sum())
    return 0.0 if denom == 0 else 1.0 - 2.0 * float((x * y).sum()) / denom
