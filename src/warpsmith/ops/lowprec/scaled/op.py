"""``warpsmith.ops.scaled_matmul``: validate (operand formats, the scale convention against the shapes),
then call the ``warpsmith::scaled_matmul`` custom op (forward only: the operands are quantized)."""
from __future__ import annotations

from typing import Optional

import torch

from ....core.errors import InvalidInputError
from ....core.opspec import Problem
from ....dispatch import launch
from ...matmul.spec import ACTIVATIONS
from ...shared.validate import check_device, check_tensor
from ..quant.reference import DTYPE_OF, FORMATS
from .spec import SCALED_MATMUL, SCALINGS, check_combination, scale_shapes
from .variant import VARIANTS

_FORMAT_OF = {v: k for k, v in DTYPE_OF.items()}


def _layout(a: torch.Tensor, b: torch.Tensor) -> str:
    return ("t" if a.stride(1) != 1 and a.shape[1] > 1 else "n") + ("t" if b.stride(0) == 1 and b.shape[0] > 1 else "n")


def problem_of(a: torch.Tensor, b: torch.Tensor, scaling: str, out_dtype: torch.dtype, bias: Optional[torch.Tensor],
               activation: str) -> Problem:
    return SCALED_MATMUL.problem({"M": a.shape[0], "N": b.shape[1], "K": a.shape[1]}, out_dtype, {
        "format": _FORMAT_OF[a.dtype], "format_b": _FORMAT_OF[b.dtype], "scaling": scaling, "bias": bias is not None, "activation": activation,
        "layout": _layout(a, b)})


@torch.library.custom_op("warpsmith::scaled_matmul", mutates_args=())
def scaled_matmul_op(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor,
                     out_dtype: torch.dtype, scaling: str, bias: Optional[torch.Tensor], activation: str) -> torch.Tensor:
    inputs = {"a": a, "b": b, "scale_a": scale_a, "scale_b": scale_b}
    if bias is not None:
        inputs["bias"] = bias
    return launch(problem_of(a, b, scaling, out_dtype, bias, activation), VARIANTS, inputs)


@scaled_matmul_op.register_fake
def _(a, b, scale_a, scale_b, out_dtype, scaling, bias, activation):
    return a.new_empty((a.shape[0], b.shape[1]), dtype=out_dtype)


def _k_major(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """On Hopper, 8-bit wgmma operands must be K-major (variant.py): copy the ones that are not."""
    from ....targets import current_device

    if current_device().target.arch != "sm_90":
        return a, b
    if a.stride(1) != 1 and a.shape[1] > 1:
        a = a.contiguous()
    if b.stride(0) != 1 and b.shape[0] > 1:
        b = b.t().contiguous().t()
    return a, b


def _is_tensor_scale(s: torch.Tensor) -> bool:
    """One scale for the whole operand: one element, in any shape of at most 2 dims ((), (1,), (1, 1))."""
    return s.numel() == 1 and s.dim() <= 2


def infer_scaling(scale_a: torch.Tensor, scale_b: torch.Tensor, M: int, N: int, K: int) -> str:
    """The granularity the scales' shapes name (as ``torch._scaled_mm`` infers it): ``tensor`` (one element
    each), ``row`` ((M, 1) and (1, N)) or ``block`` ((M, ceil(K/128)) and (ceil(K/128), ceil(N/128))).

    Shapes that fit several give the same product, so the first is taken: tensor and row coincide only at
    M = N = 1 (one row, one column), tensor and block at M = 1, K <= 128, N <= 128 (one block each), row
    and block at K <= 128, N = 1 (a row's scale is its one block's). Shapes that fit none are refused."""
    if _is_tensor_scale(scale_a) and _is_tensor_scale(scale_b):
        return "tensor"
    given = (tuple(scale_a.shape), tuple(scale_b.shape))
    for scaling in ("row", "block"):
        if given == scale_shapes(scaling, M, N, K):
            return scaling
    want = "; ".join(f"{sa} and {sb} ({name})" for name, (sa, sb) in
                     (("tensor", ((1,), (1,))), *((n, scale_shapes(n, M, N, K)) for n in ("row", "block"))))
    raise InvalidInputError("shapes of scale_a and scale_b", f"the shapes of one scaling of a ({M}, {K}) x ({K}, {N}) "
                            f"product: {want}", f"{given[0]} and {given[1]}")


def scaled_matmul(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor,
                  out_dtype: torch.dtype = torch.bfloat16, bias: Optional[torch.Tensor] = None,
                  activation: Optional[str] = None, scaling: Optional[str] = None) -> torch.Tensor:
    """``act((a * scale_a) @ (b * scale_b) + bias)`` on fp8 or int8 operands, fp32 (int32 for int8) accumulation.

    Multiply to dequantize: the real value of ``a[m, k]`` is ``a[m, k] * scale``. The granularity is
    ``scaling``, read off the scales' shapes where not given (as ``torch._scaled_mm`` does); the scales
    must have exactly its shapes (fp32, contiguous or not):

    - ``"tensor"``: scale_a (1,), scale_b (1,) (or any shape of one element: (), (1, 1));
    - ``"row"``: scale_a (M, 1) per row (token), scale_b (1, N) per column (channel);
    - ``"block"`` (fp8 only, DeepSeek-V3): scale_a (M, ceil(K/128)) per 1x128 block,
      scale_b (ceil(K/128), ceil(N/128)) per 128x128 block (for a weight W (N, K) with block scales
      S_W (ceil(N/128), ceil(K/128)): b = W.t(), scale_b = S_W.t()).

    Shapes that fit two scalings (tensor and row at M = N = 1; tensor and block at M = 1 with K, N <= 128;
    row and block at N = 1 with K <= 128) describe the same product: the first of tensor, row, block is
    taken (:func:`infer_scaling`).

    Args:
        a: (M, K), torch.float8_e4m3fn, torch.float8_e5m2 or torch.int8; any strides.
        b: (K, N), the dtype of ``a``, or for fp8 the other fp8 dtype (mixed e4m3 x e5m2 or e5m2 x e4m3:
            e4m3 activations or weights with e5m2 gradients); any strides (K-major, ``W.t()``, is the
            fast layout on Hopper).
        scale_a: see above.
        scale_b: see above.
        out_dtype: torch.bfloat16, torch.float16 or torch.float32.
        bias: optional (N,) in ``out_dtype``, added before the activation.
        activation: None, "relu", "gelu" or "silu".
        scaling: "tensor", "row" or "block"; None (default): inferred from the shapes of the scales.

    Returns:
        (M, N) in ``out_dtype``.

    Raises:
        InvalidInputError: a wrong dtype, shape or device of any argument, a scale whose shape does
        not match ``scaling``, or (``scaling`` not given) scales whose shapes fit no scaling (the message
        names the expected and the given shapes).
    """
    a, b = check_tensor("a", a), check_tensor("b", b)
    scale_a, scale_b = check_tensor("scale_a", scale_a), check_tensor("scale_b", scale_b)
    if a.dtype not in _FORMAT_OF:
        raise InvalidInputError("dtype of a", "torch.float8_e4m3fn, torch.float8_e5m2 or torch.int8", str(a.dtype))
    if b.dtype != a.dtype and (b.dtype not in _FORMAT_OF or torch.int8 in (a.dtype, b.dtype)):
        want = f"{a.dtype} (as a)" if a.dtype == torch.int8 else \
            "torch.float8_e4m3fn or torch.float8_e5m2 (fp8, as a)"
        raise InvalidInputError("dtype of b", want, str(b.dtype))
    if a.dim() != 2 or b.dim() != 2:
        raise InvalidInputError("a and b", "2-D tensors (M, K) and (K, N)", f"{tuple(a.shape)} and {tuple(b.shape)}")
    if a.shape[1] != b.shape[0]:
        raise InvalidInputError("inner dimensions", f"b.shape[0] == a.shape[1] == {a.shape[1]}", b.shape[0])
    if min(a.shape) < 1 or b.shape[1] < 1:
        raise InvalidInputError("sizes", "every dimension >= 1", f"a {tuple(a.shape)}, b {tuple(b.shape)}")
    if scaling is None:
        scaling = infer_scaling(scale_a, scale_b, a.shape[0], b.shape[1], a.shape[1])
    if scaling not in SCALINGS:
        raise InvalidInputError("scaling", "one of " + ", ".join(SCALINGS) + " (or None: from the scales' shapes)",
                                scaling)
    check_combination(_FORMAT_OF[a.dtype], scaling, _FORMAT_OF[b.dtype])
    act = "none" if activation is None else activation
    if act not in ACTIVATIONS:
        raise InvalidInputError("activation", "None or one of " + ", ".join(ACTIVATIONS[1:]), activation)
    if out_dtype not in SCALED_MATMUL.dtypes:
        raise InvalidInputError("out_dtype", "torch.bfloat16, torch.float16 or torch.float32", str(out_dtype))
    M, K = a.shape
    N = b.shape[1]
    want_a, want_b = scale_shapes(scaling, M, N, K)
    for name, s, want in (("scale_a", scale_a, want_a), ("scale_b", scale_b, want_b)):
        if tuple(s.shape) != want and not (scaling == "tensor" and _is_tensor_scale(s)):
            raise InvalidInputError(f"shape of {name}", f"{want} for {scaling} scaling of a ({M}, {K}) x ({K}, {N}) "
                                    "product", tuple(s.shape))
        if s.dtype != torch.float32:
            raise InvalidInputError(f"dtype of {name}", "torch.float32", str(s.dtype))
    for name, t in (("b", b), ("scale_a", scale_a), ("scale_b", scale_b)):
        if t.device != a.device:
            raise InvalidInputError(f"device of {name}", f"{a.device} (as a)", str(t.device))
    if bias is not None:
        bias = check_tensor("bias", bias)
        if tuple(bias.shape) != (N,) or bias.dtype != out_dtype or bias.device != a.device:
            raise InvalidInputError("bias", f"a ({N},) {out_dtype} tensor on {a.device}",
                                    f"{tuple(bias.shape)} {bias.dtype} on {bias.device}")
    check_device("a", a)
    a, b = _k_major(a, b)
    return scaled_matmul_op(a, b, scale_a, scale_b, out_dtype, scaling, bias, act)


__all__ = ["scaled_matmul", "scaled_matmul_op", "problem_of", "infer_scaling", "FORMATS"]
