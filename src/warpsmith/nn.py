"""Drop-in modules backed by warpsmith's verified kernels.

``RMSNorm``, ``LayerNorm``, ``Softmax``, ``LogSoftmax`` and ``CrossEntropyLoss`` subclass their
``torch.nn`` namesakes: same constructor, parameters, initialisation and ``state_dict``, so a
checkpoint loads into either and ``isinstance`` checks still hold; only ``forward`` changes. What a
kernel does not support (normalizing over several trailing dimensions, a softmax over another
dimension, class weights) is refused at construction with an error naming it, never run silently
some other way. ``SwiGLU``, ``GEGLU``, ``LinearCrossEntropyLoss`` and ``Attention`` have no ``torch.nn``
counterpart. :func:`from_torch` converts an existing module, sharing its parameters (an optimizer
built before the conversion keeps working).

Example:
    >>> import torch, warpsmith.nn as wnn
    >>> norm = wnn.RMSNorm(4096, eps=1e-6)
    >>> y = norm(torch.randn(2, 16, 4096))
"""
from __future__ import annotations

from typing import Optional

import torch

from . import ops
from .core.errors import InvalidInputError
from .ops.lowprec.scaled.linear import FP8_RECIPES, fp8_linear, int8_linear, int8_weight


def _last_dim_only(cls: str, normalized_shape: tuple[int, ...]) -> None:
    if len(normalized_shape) != 1:
        raise InvalidInputError(f"normalized_shape of warpsmith.nn.{cls}",
                                "one trailing dimension (an int or a 1-element shape)", tuple(normalized_shape))


class RMSNorm(torch.nn.RMSNorm):
    """``torch.nn.RMSNorm`` over the last dimension; ``eps=None`` means ``torch.finfo(x.dtype).eps``
    as in torch. ``forward(x, residual=None)`` also takes a residual, added before normalizing;
    then it returns ``(y, x + residual)``."""

    def __init__(self, normalized_shape, eps: Optional[float] = None, elementwise_affine: bool = True,
                 device=None, dtype=None) -> None:
        super().__init__(normalized_shape, eps, elementwise_affine, device, dtype)
        _last_dim_only("RMSNorm", self.normalized_shape)

    def forward(self, x: torch.Tensor, residual: Optional[torch.Tensor] = None):
        eps = torch.finfo(x.dtype).eps if self.eps is None else self.eps
        return ops.rms_norm(x, self.weight, eps, residual=residual)


class LayerNorm(torch.nn.LayerNorm):
    """``torch.nn.LayerNorm`` over the last dimension; ``forward(x, residual=None)`` as :class:`RMSNorm`."""

    def __init__(self, normalized_shape, eps: float = 1e-5, elementwise_affine: bool = True, bias: bool = True,
                 device=None, dtype=None) -> None:
        super().__init__(normalized_shape, eps, elementwise_affine, bias, device, dtype)
        _last_dim_only("LayerNorm", self.normalized_shape)

    def forward(self, x: torch.Tensor, residual: Optional[torch.Tensor] = None):
        return ops.layer_norm(x, self.weight, self.bias, self.eps, residual=residual)


def _dim_last(cls: str, dim: Optional[int]) -> None:
    if dim not in (-1,):
        raise InvalidInputError(f"dim of warpsmith.nn.{cls}", "-1 (the kernels reduce over the last dimension)", dim)


class Softmax(torch.nn.Softmax):
    """``torch.nn.Softmax(dim=-1)``."""

    def __init__(self, dim: Optional[int] = -1) -> None:
        _dim_last("Softmax", dim)
        super().__init__(dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ops.softmax(x)


class LogSoftmax(torch.nn.LogSoftmax):
    """``torch.nn.LogSoftmax(dim=-1)``."""

    def __init__(self, dim: Optional[int] = -1) -> None:
        _dim_last("LogSoftmax", dim)
        super().__init__(dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ops.log_softmax(x)


class CrossEntropyLoss(torch.nn.CrossEntropyLoss):
    """``torch.nn.CrossEntropyLoss`` on (..., V) logits and integer class targets (no class weights)."""

    def __init__(self, weight: Optional[torch.Tensor] = None, size_average=None, ignore_index: int = -100,
                 reduce=None, reduction: str = "mean", label_smoothing: float = 0.0) -> None:
        if weight is not None:
            raise InvalidInputError("weight of warpsmith.nn.CrossEntropyLoss", "None (class weights are not supported)",
                                    f"a tensor of shape {tuple(weight.shape)}")
        super().__init__(None, size_average, ignore_index, reduce, reduction, label_smoothing)

    def forward(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return ops.cross_entropy(logits, target, self.ignore_index, self.label_smoothing, self.reduction)


class LinearCrossEntropyLoss(torch.nn.Module):
    """Cross-entropy of ``hidden @ weight.T + bias`` without materializing the logits (chunked).

    ``forward(hidden, weight, target, bias=None)``: hidden (..., H), weight (V, H) such as an
    ``lm_head.weight``, target (...) class indices.
    """

    def __init__(self, ignore_index: int = -100, reduction: str = "mean", label_smoothing: float = 0.0) -> None:
        super().__init__()
        self.ignore_index, self.reduction, self.label_smoothing = ignore_index, reduction, label_smoothing

    def forward(self, hidden: torch.Tensor, weight: torch.Tensor, target: torch.Tensor,
                bias: Optional[torch.Tensor] = None) -> torch.Tensor:
        return ops.fused_linear_cross_entropy(hidden.reshape(-1, hidden.shape[-1]), weight, target.reshape(-1),
                                              bias, self.ignore_index, self.label_smoothing, self.reduction)


class SwiGLU(torch.nn.Module):
    """``silu(gate) * up``; ``forward(gate, up=None)`` where ``up=None`` means ``gate`` is (..., 2H)
    holding gate then up."""

    def forward(self, gate: torch.Tensor, up: Optional[torch.Tensor] = None) -> torch.Tensor:
        return ops.swiglu(gate, up)


class GEGLU(torch.nn.Module):
    """``gelu(gate) * up`` with ``approximate="none"`` (erf) or ``"tanh"``; inputs as :class:`SwiGLU`."""

    def __init__(self, approximate: str = "none") -> None:
        super().__init__()
        self.approximate = approximate

    def forward(self, gate: torch.Tensor, up: Optional[torch.Tensor] = None) -> torch.Tensor:
        return ops.geglu(gate, up, approximate=self.approximate)


class Attention(torch.nn.Module):
    """Scaled dot-product attention with fixed semantics: ``forward(q, k, v, cu_seqlens_q=None,
    cu_seqlens_k=None)`` is :func:`warpsmith.ops.attention` with this module's ``causal``,
    ``window``, ``scale`` and ``softcap`` (no parameters; (B, H, S, D) or packed (T, H, D) inputs,
    GQA by head counts)."""

    def __init__(self, causal=False, window=None, scale: Optional[float] = None,
                 softcap: Optional[float] = None) -> None:
        super().__init__()
        self.causal, self.window, self.scale, self.softcap = causal, window, scale, softcap

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_seqlens_q: Optional[torch.Tensor] = None,
                cu_seqlens_k: Optional[torch.Tensor] = None) -> torch.Tensor:
        return ops.attention(q, k, v, causal=self.causal, window=self.window, scale=self.scale, softcap=self.softcap,
                             cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k)

    def extra_repr(self) -> str:
        return f"causal={self.causal!r}, window={self.window!r}, scale={self.scale!r}, softcap={self.softcap!r}"


_CONVERTIBLE = {torch.nn.RMSNorm: RMSNorm, torch.nn.LayerNorm: LayerNorm, torch.nn.Softmax: Softmax,
                torch.nn.LogSoftmax: LogSoftmax, torch.nn.CrossEntropyLoss: CrossEntropyLoss}


def from_torch(module: torch.nn.Module) -> torch.nn.Module:
    """The warpsmith equivalent of a ``torch.nn`` module, sharing its parameters (same objects).

    Raises:
        InvalidInputError: the module has no warpsmith equivalent, or uses something the kernels
            do not support (several normalized dimensions, another softmax dim, class weights).
    """
    cls = _CONVERTIBLE.get(type(module))
    if cls is None:
        raise InvalidInputError("module", "one of torch.nn." + ", torch.nn.".join(c.__name__ for c in _CONVERTIBLE),
                                type(module).__name__)
    if cls in (Softmax, LogSoftmax):
        return cls(module.dim)
    if cls is CrossEntropyLoss:
        return CrossEntropyLoss(module.weight, ignore_index=module.ignore_index, reduction=module.reduction,
                                label_smoothing=module.label_smoothing)
    new = cls.__new__(cls)
    torch.nn.Module.__init__(new)
    new.__dict__.update({k: v for k, v in module.__dict__.items() if k not in ("_parameters", "_buffers", "_modules")})
    new._parameters = dict(module._parameters)  # the same Parameter objects
    new._buffers, new._modules = dict(module._buffers), dict(module._modules)
    _last_dim_only(cls.__name__, tuple(new.normalized_shape))
    return new


class Int4Linear(torch.nn.Module):
    """Inference-only linear layer with an int4 weight packed by AutoAWQ (GEMM) or GPTQ (v1), run by
    :func:`warpsmith.ops.int4_matmul` (formats: :mod:`warpsmith.ops.lowprec.int4.formats`).

    Buffers ``qweight``, ``qzeros``, ``scales`` (and ``g_idx`` for GPTQ act-order, ``bias``) keep the
    checkpoint's names and layouts. Activations in another dtype than the scales' (float16 or bfloat16)
    are cast to it, and the output back. Build one from checkpoint tensors, from an
    :class:`~warpsmith.ops.lowprec.int4.formats.Int4Weight`, or from an ``nn.Linear`` by RTN
    quantization (:meth:`from_linear`).
    """

    def __init__(self, qweight: torch.Tensor, qzeros: torch.Tensor, scales: torch.Tensor, group_size: int,
                 format: str = "awq", g_idx: Optional[torch.Tensor] = None, bias: Optional[torch.Tensor] = None,
                 in_features: Optional[int] = None) -> None:
        super().__init__()
        from .ops.lowprec.int4.op import check_weight

        K = in_features if in_features is not None else qweight.shape[0] * (8 if format == "gptq" else 1)
        N = check_weight(format, qweight, qzeros, scales, group_size, K, g_idx)
        if scales.dtype not in (torch.float16, torch.bfloat16):
            raise InvalidInputError("dtype of scales", "float16 or bfloat16 (the compute dtype)", str(scales.dtype))
        if g_idx is not None and torch.equal(g_idx.long().cpu(), torch.arange(K) // group_size):
            g_idx = None  # the trivial assignment: no gather needed
        self.in_features, self.out_features, self.group_size, self.format = K, N, group_size, format
        self.register_buffer("qweight", qweight.contiguous())
        self.register_buffer("qzeros", qzeros.contiguous())
        self.register_buffer("scales", scales.contiguous())
        self.register_buffer("g_idx", None if g_idx is None else g_idx.to(torch.int32).contiguous())
        if bias is not None and (tuple(bias.shape) != (N,) or not bias.is_floating_point()):
            raise InvalidInputError("bias", f"a floating ({N},) tensor", tuple(bias.shape))
        self.register_buffer("bias", None if bias is None else bias.to(scales.dtype).contiguous())

    @classmethod
    def from_weight(cls, weight, bias: Optional[torch.Tensor] = None) -> "Int4Linear":
        """From an :class:`~warpsmith.ops.lowprec.int4.formats.Int4Weight`."""
        return cls(weight.qweight, weight.qzeros, weight.scales, weight.group_size, weight.format, weight.g_idx, bias)

    @classmethod
    def from_linear(cls, linear: torch.nn.Linear, group_size: int = 128, format: str = "awq",
                    dtype: torch.dtype = torch.float16) -> "Int4Linear":
        """RTN-quantize an ``nn.Linear`` (see :func:`~warpsmith.ops.lowprec.int4.formats.quantize_int4`);
        ``dtype`` is the scales' and compute dtype."""
        from .ops.lowprec.int4.formats import quantize_int4

        w = quantize_int4(linear.weight.detach().t(), group_size, format, scale_dtype=dtype)
        return cls.from_weight(w, None if linear.bias is None else linear.bias.detach())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        from .ops.lowprec.int4.op import int4_matmul_op

        dt = self.scales.dtype
        y = int4_matmul_op(x.to(dt), self.qweight, self.qzeros, self.scales, self.g_idx, self.bias,
                           self.group_size, self.format)
        return y.to(x.dtype)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, format={self.format}, "
                f"group_size={self.group_size}, act_order={self.g_idx is not None}, bias={self.bias is not None}")


__all__ = ["RMSNorm", "LayerNorm", "Softmax", "LogSoftmax", "CrossEntropyLoss", "LinearCrossEntropyLoss",
           "SwiGLU", "GEGLU", "Attention", "from_torch"]
__all__ += ["Int4Linear"]


# ---- pooling and channel normalizations (ops/pool, ops/norm/channel/) -------------------------------
def _pool_classes():
    """MaxPool{1,2,3}d, AvgPool{1,2,3}d, AdaptiveAvgPool{1,2,3}d: torch's modules, forward on warpsmith."""
    out = {}
    for d in (1, 2, 3):
        def max_forward(self, x, _d=d):
            return ops.max_pool(x, self.kernel_size, self.stride, self.padding, self.dilation, self.ceil_mode,
                                self.return_indices, dims=_d)

        def avg_forward(self, x, _d=d):
            return ops.avg_pool(x, self.kernel_size, self.stride, self.padding, self.ceil_mode, self.count_include_pad,
                                getattr(self, "divisor_override", None), dims=_d)

        def adaptive_forward(self, x, _d=d):
            return ops.adaptive_avg_pool(x, self.output_size, dims=_d)

        for name, fwd in ((f"MaxPool{d}d", max_forward), (f"AvgPool{d}d", avg_forward),
                          (f"AdaptiveAvgPool{d}d", adaptive_forward)):
            base = getattr(torch.nn, name)
            out[name] = type(name, (base,), {"forward": fwd, "__module__": __name__,
                                             "__doc__": f"``torch.nn.{name}`` on warpsmith's pooling kernels."})
    return out


globals().update(_pool_classes())


class _BatchNormMixin:
    """torch's _BatchNorm.forward (momentum None: cumulative average; eval: running statistics),
    on :func:`warpsmith.ops.batch_norm`."""

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        self._check_input_dim(input)
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            self.num_batches_tracked.add_(1)
            factor = 1.0 / float(self.num_batches_tracked) if self.momentum is None else self.momentum
        bn_training = self.training or (self.running_mean is None and self.running_var is None)
        use_running = not self.training or self.track_running_stats
        return ops.batch_norm(input, self.running_mean if use_running else None,
                              self.running_var if use_running else None, self.weight, self.bias, bn_training, factor,
                              self.eps)


class BatchNorm1d(_BatchNormMixin, torch.nn.BatchNorm1d):
    """``torch.nn.BatchNorm1d`` on warpsmith's channel-norm kernels."""


class BatchNorm2d(_BatchNormMixin, torch.nn.BatchNorm2d):
    """``torch.nn.BatchNorm2d`` on warpsmith's channel-norm kernels."""


class BatchNorm3d(_BatchNormMixin, torch.nn.BatchNorm3d):
    """``torch.nn.BatchNorm3d`` on warpsmith's channel-norm kernels."""


class _InstanceNormMixin:
    """torch's _InstanceNorm.forward (unbatched input, optional running statistics) on
    :func:`warpsmith.ops.instance_norm`."""

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        self._check_input_dim(input)
        unbatched = input.dim() == self._get_no_batch_dim()
        x = input.unsqueeze(0) if unbatched else input
        y = ops.instance_norm(x, self.running_mean, self.running_var, self.weight, self.bias,
                              self.training or not self.track_running_stats,
                              self.momentum if self.momentum is not None else 0.0, self.eps)
        return y.squeeze(0) if unbatched else y


class InstanceNorm1d(_InstanceNormMixin, torch.nn.InstanceNorm1d):
    """``torch.nn.InstanceNorm1d`` on warpsmith's channel-norm kernels."""


class InstanceNorm2d(_InstanceNormMixin, torch.nn.InstanceNorm2d):
    """``torch.nn.InstanceNorm2d`` on warpsmith's channel-norm kernels."""


class InstanceNorm3d(_InstanceNormMixin, torch.nn.InstanceNorm3d):
    """``torch.nn.InstanceNorm3d`` on warpsmith's channel-norm kernels."""


class GroupNorm(torch.nn.GroupNorm):
    """``torch.nn.GroupNorm`` on warpsmith's channel-norm kernels."""

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        return ops.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)


__all__ += ["MaxPool1d", "MaxPool2d", "MaxPool3d", "AvgPool1d", "AvgPool2d", "AvgPool3d", "AdaptiveAvgPool1d",
            "AdaptiveAvgPool2d", "AdaptiveAvgPool3d", "BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "InstanceNorm1d",
            "InstanceNorm2d", "InstanceNorm3d", "GroupNorm"]


# ---- low precision (ops/lowprec; their math and the fp8 autograd: ops/lowprec/scaled/linear.py) ------------


class Fp8Linear(torch.nn.Linear):
    """``torch.nn.Linear`` computed in fp8 for training, with dynamic scaling (recomputed every call).
    Two recipes (``recipe``), both with e4m3 forward operands and the *hybrid* backward (the gradient
    in e5m2 for its range, the other operand in e4m3 for its precision, mixed-format GEMMs), fp32
    accumulation, the bias in the forward GEMM's epilogue and its gradient in fp32:

    - ``"rowwise"`` (default): activations per token (row), the weight per output channel; backward,
      the gradient per row and the other operand (the weight, or the saved activations) re-quantized
      per column (its reduction dimension);
    - ``"tensorwise"``: one scale per tensor (x, W, and the gradient), each from its amax (two passes
      over the tensor); the forward's quantized x and W are saved and reused by the backward, as a
      per-tensor scale survives the transpose (fp8 bytes saved instead of the activations).

    The parameters stay in their dtype (the master weights the optimizer updates); inputs must be
    float32, float16 or bfloat16, with the last dimension ``in_features``.
    """

    recipe: str = "rowwise"

    @classmethod
    def from_linear(cls, linear: torch.nn.Linear, recipe: str = "rowwise") -> "Fp8Linear":
        """An Fp8Linear sharing ``linear``'s parameters (an optimizer built before keeps working)."""
        if recipe not in FP8_RECIPES:
            raise InvalidInputError("recipe of Fp8Linear", "one of " + ", ".join(FP8_RECIPES), recipe)
        m = cls.__new__(cls)
        torch.nn.Module.__init__(m)
        m.in_features, m.out_features = linear.in_features, linear.out_features
        m.weight, m.bias = linear.weight, linear.bias
        m.recipe = recipe
        return m

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x2 = x.reshape(-1, self.in_features)
        y = fp8_linear(x2, self.weight, self.bias, self.recipe)
        return y.reshape(*x.shape[:-1], self.out_features)

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, recipe={self.recipe}"


class Int8Linear(torch.nn.Module):
    """W8A8 inference-only linear layer (no backward): the weight is quantized once to int8 per output
    channel (``from_linear``); each call quantizes its activations to int8 per token and runs one scaled
    GEMM with exact int32 accumulation, scales and bias in the epilogue, output in the input's dtype.

    Buffers: ``qweight`` (out_features, in_features) int8, ``weight_scale`` (out_features, 1) fp32,
    ``bias`` (out_features,) or None.
    """

    def __init__(self, qweight: torch.Tensor, weight_scale: torch.Tensor, bias: Optional[torch.Tensor]) -> None:
        super().__init__()
        self.out_features, self.in_features = qweight.shape
        self.register_buffer("qweight", qweight)
        self.register_buffer("weight_scale", weight_scale)
        self.register_buffer("bias", bias)

    @classmethod
    def from_linear(cls, linear: torch.nn.Linear) -> "Int8Linear":
        q, s = int8_weight(linear.weight)
        b = None if linear.bias is None else linear.bias.detach().clone()
        return cls(q, s, b)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if torch.is_grad_enabled() and x.requires_grad:
            raise InvalidInputError("input of warpsmith.nn.Int8Linear", "a tensor without grad (inference only)",
                                    "a tensor that requires grad")
        y = int8_linear(x.reshape(-1, self.in_features), self.qweight, self.weight_scale, self.bias)
        return y.reshape(*x.shape[:-1], self.out_features)


# ---- convolutions ----------------------------------------------------------------------------------
class _ConvMixin:
    """``forward`` of the conv drop-ins: a padding_mode other than 'zeros' is applied with ``F.pad``
    first (as torch does), then the conv runs unpadded; 'zeros' padding is the kernel's mask."""

    def _warpsmith_forward(self, x: torch.Tensor) -> torch.Tensor:
        padding = self.padding
        if self.padding_mode != "zeros":
            x = torch.nn.functional.pad(x, self._reversed_padding_repeated_twice, mode=self.padding_mode)
            padding = 0
        return ops.conv(x, self.weight, self.bias, self.stride, padding, self.dilation, self.groups)


class Conv1d(_ConvMixin, torch.nn.Conv1d):
    """``torch.nn.Conv1d`` on warpsmith's conv kernels (every padding_mode; see _ConvMixin)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self._warpsmith_forward(x)


class Conv2d(_ConvMixin, torch.nn.Conv2d):
    """``torch.nn.Conv2d`` on warpsmith's conv kernels (the variant dispatch picks: a tuned record, else
    the direct depthwise kernel where groups == in_channels, else the implicit GEMM); NCHW or
    channels-last in place."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self._warpsmith_forward(x)


class Conv3d(_ConvMixin, torch.nn.Conv3d):
    """``torch.nn.Conv3d`` on warpsmith's conv kernels (as Conv2d)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self._warpsmith_forward(x)


class _ConvTransposeMixin:
    def _warpsmith_forward(self, x: torch.Tensor, output_size: Optional[list[int]] = None) -> torch.Tensor:
        if self.padding_mode != "zeros":  # torch refuses it at construction too; kept for subclasses
            raise InvalidInputError(f"padding_mode of warpsmith.nn.{type(self).__name__}", "'zeros'", self.padding_mode)
        nd = x.dim() - 2
        opad = self._output_padding(x, output_size, self.stride, self.padding, self.kernel_size, nd, self.dilation)
        return ops.conv_transpose(x, self.weight, self.bias, self.stride, self.padding, tuple(opad), self.groups,
                                  self.dilation)


class ConvTranspose1d(_ConvTransposeMixin, torch.nn.ConvTranspose1d):
    """``torch.nn.ConvTranspose1d`` on warpsmith's gather-form implicit GEMM."""

    def forward(self, x: torch.Tensor, output_size: Optional[list[int]] = None) -> torch.Tensor:
        return self._warpsmith_forward(x, output_size)


class ConvTranspose2d(_ConvTransposeMixin, torch.nn.ConvTranspose2d):
    """``torch.nn.ConvTranspose2d`` on warpsmith's gather-form implicit GEMM."""

    def forward(self, x: torch.Tensor, output_size: Optional[list[int]] = None) -> torch.Tensor:
        return self._warpsmith_forward(x, output_size)


class ConvTranspose3d(_ConvTransposeMixin, torch.nn.ConvTranspose3d):
    """``torch.nn.ConvTranspose3d`` on warpsmith's gather-form implicit GEMM."""

    def forward(self, x: torch.Tensor, output_size: Optional[list[int]] = None) -> torch.Tensor:
        return self._warpsmith_forward(x, output_size)


__all__ += ["Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d"]
