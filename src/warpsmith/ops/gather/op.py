"""Public gather/scatter ops: ``embedding``, ``index_select``, ``gather``, ``index_add``, ``scatter_add``,
``scatter`` and ``embedding_backward``.

Each validates its arguments, views its tensors as the family's ``(A, V, B)`` / ``(A, J, B)`` form
(the dims before ``dim`` flattened into ``A``, those after into ``B``; a tensor whose dims do not
merge is copied first), checks the index values on the host (``check_indices=True``, see
:mod:`.variant`) and launches through :func:`warpsmith.dispatch.launch`.

Not yet: ``warpsmith::`` custom ops with autograd (the compiler calls the kernels directly).
"""
from __future__ import annotations

import math

import torch

from ... import dispatch
from ...core.errors import InvalidInputError
from .spec import GATHER, SCATTER, SCATTER_ADD
from .variant import VARIANTS, check_index

_BY_OP = {op: [v for v in VARIANTS if v.op == op] for op in ("gather", "scatter_add", "scatter")}


def _dim(t: torch.Tensor, dim: int) -> int:
    if not -t.dim() <= dim < max(t.dim(), 1):
        raise InvalidInputError("dim", f"a dim of a {t.dim()}-D tensor", dim)
    return dim % max(t.dim(), 1)


def _ab(shape: tuple[int, ...], dim: int) -> tuple[int, int]:
    return math.prod(shape[:dim]), math.prod(shape[dim + 1:])


def _float(t: torch.Tensor, name: str) -> None:
    if not isinstance(t, torch.Tensor) or t.dtype not in GATHER.dtypes:
        raise InvalidInputError(f"{name}", "a float32, float16 or bfloat16 tensor",
                                getattr(t, "dtype", type(t).__name__))


def _run(op: str, shape: dict, dtype: torch.dtype, kind: str, inputs: dict, check_indices: bool,
         skip: int | None = None) -> torch.Tensor:
    spec = {"gather": GATHER, "scatter_add": SCATTER_ADD, "scatter": SCATTER}[op]
    problem = spec.problem(shape, dtype, {"index": kind})
    if check_indices:
        check_index(inputs["index"], shape["V"], "index", skip)
    choice = dispatch.select(problem, _BY_OP[op])
    return choice.variant.launch(inputs, problem, choice.config, check_indices=False, skip=skip)


def index_select(src: torch.Tensor, dim: int, index: torch.Tensor, *, check_indices: bool = True) -> torch.Tensor:
    """``torch.index_select``: the rows ``index`` (a vector) of ``src`` along ``dim``."""
    _float(src, "src")
    d = _dim(src, dim)
    if index.dim() > 1:
        raise InvalidInputError("index", "a vector (or a scalar)", tuple(index.shape))
    idx = index.reshape(-1)
    shape = tuple(src.shape) or (1,)
    a, b = _ab(shape, d)
    y = _run("gather", {"A": a, "J": max(1, idx.numel()), "B": b, "V": shape[d]}, src.dtype, "rows",
             {"src": src.reshape(a, shape[d], b), "index": idx}, check_indices)
    return y.view(*shape[:d], idx.numel(), *shape[d + 1:])


def embedding(weight: torch.Tensor, indices: torch.Tensor, *, check_indices: bool = True) -> torch.Tensor:
    """``F.embedding``: rows of ``weight`` (V, D) at ``indices`` (any shape) -> (*indices.shape, D)."""
    if weight.dim() != 2:
        raise InvalidInputError("weight", "a 2-D (V, D) tensor", tuple(weight.shape))
    y = index_select(weight, 0, indices.reshape(-1), check_indices=check_indices)
    return y.view(*indices.shape, weight.shape[1])


def gather(src: torch.Tensor, dim: int, index: torch.Tensor, *, check_indices: bool = True) -> torch.Tensor:
    """``torch.gather``: ``out[..., j, ...] = src[..., index[..., j, ...], ...]`` along ``dim``; ``index``
    has ``src``'s rank and at most its size in every other dim."""
    _float(src, "src")
    d = _dim(src, dim)
    if index.dim() != src.dim() or any(i > s for k, (i, s) in enumerate(zip(index.shape, src.shape)) if k != d):
        raise InvalidInputError("shape of index", f"rank {src.dim()}, within {tuple(src.shape)} outside dim {d}",
                                tuple(index.shape))
    for k in range(src.dim()):
        if k != d:
            src = src.narrow(k, 0, index.shape[k])
    a, b = _ab(tuple(index.shape), d)
    y = _run("gather", {"A": a, "J": index.shape[d], "B": b, "V": src.shape[d]}, src.dtype, "elements",
             {"src": src.reshape(a, src.shape[d], b), "index": index.reshape(a, index.shape[d], b)}, check_indices)
    return y.view(index.shape)


def _scatter(op: str, base: torch.Tensor, dim: int, index: torch.Tensor, src: torch.Tensor, rows: bool,
             check_indices: bool, skip: int | None = None) -> torch.Tensor:
    _float(base, "self")
    d = _dim(base, dim)
    if src.dtype != base.dtype:
        raise InvalidInputError("dtype of src", str(base.dtype), str(src.dtype))
    shape = tuple(base.shape)
    if rows:
        want = shape[:d] + (index.numel(),) + shape[d + 1:]
        if tuple(src.shape) != want or index.dim() > 1:
            raise InvalidInputError("shape of src and index", f"src {want} and a vector index",
                                    f"src {tuple(src.shape)}, index {tuple(index.shape)}")
        a, b = _ab(shape, d)
        idx, j = index.reshape(-1), index.numel()
    else:
        if tuple(index.shape) != tuple(src.shape) or index.dim() != base.dim() or \
                any(i != s for k, (i, s) in enumerate(zip(index.shape, shape)) if k != d):
            raise InvalidInputError("shape of index", f"src's shape, equal to self's {shape} outside dim {d}",
                                    tuple(index.shape))
        a, b = _ab(shape, d)
        j = index.shape[d]
        idx = index.reshape(a, j, b)
    y = _run(op, {"A": a, "J": max(1, j), "B": b, "V": shape[d]}, base.dtype, "rows" if rows else "elements",
             {"self": base.reshape(a, shape[d], b), "index": idx, "src": src.reshape(a, j, b)}, check_indices, skip)
    return y.view(shape)


def index_add(base: torch.Tensor, dim: int, index: torch.Tensor, src: torch.Tensor, *,
              check_indices: bool = True) -> torch.Tensor:
    """``torch.index_add`` (alpha 1): ``base`` with the rows of ``src`` added at ``index`` along ``dim``."""
    return _scatter("scatter_add", base, dim, index, src, True, check_indices)


def scatter_add(base: torch.Tensor, dim: int, index: torch.Tensor, src: torch.Tensor, *,
                check_indices: bool = True) -> torch.Tensor:
    """``torch.scatter_add`` with ``index`` and ``src`` of one shape."""
    return _scatter("scatter_add", base, dim, index, src, False, check_indices)


def scatter(base: torch.Tensor, dim: int, index: torch.Tensor, src: torch.Tensor, *,
            check_indices: bool = True) -> torch.Tensor:
    """``torch.scatter`` with ``index`` and ``src`` of one shape (duplicate indices: one writer wins)."""
    return _scatter("scatter", base, dim, index, src, False, check_indices)


def embedding_backward(grad: torch.Tensor, indices: torch.Tensor, num_weights: int, padding_idx: int = -1, *,
                       check_indices: bool = True) -> torch.Tensor:
    """``aten.embedding_dense_backward`` (no ``scale_grad_by_freq``): the (V, D) weight gradient, the
    rows of ``grad`` (*indices.shape, D) summed at their index, ``padding_idx``'s rows skipped."""
    d = grad.shape[-1]
    base = torch.zeros((num_weights, d), dtype=grad.dtype, device=grad.device)
    skip = padding_idx if padding_idx >= 0 else None
    return _scatter("scatter_add", base, 0, indices.reshape(-1), grad.reshape(-1, d), True, check_indices, skip)
