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


__all__ = ["RMSNorm", "LayerNorm", "Softmax", "LogSoftmax", "CrossEntropyLoss", "LinearCrossEntropyLoss",
           "SwiGLU", "GEGLU", "Attention", "from_torch"]


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
    """``torch.nn.Conv1d`` on warpsmith's implicit-GEMM kernel (every padding_mode; see _ConvMixin)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self._warpsmith_forward(x)


class Conv2d(_ConvMixin, torch.nn.Conv2d):
    """``torch.nn.Conv2d`` on warpsmith's implicit-GEMM kernel; NCHW or channels-last in place."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self._warpsmith_forward(x)


class Conv3d(_ConvMixin, torch.nn.Conv3d):
    """``torch.nn.Conv3d`` on warpsmith's implicit-GEMM kernel."""

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
