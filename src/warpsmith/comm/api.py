"""The functional API: ``all_reduce``, ``all_gather``, ``reduce_scatter`` and the fused
``all_reduce_add_rms_norm`` over a ``torch.distributed`` process group.

Where the group has symmetric buffers (:func:`attach`: the CPU shared-memory world) the Triton
kernels run; otherwise the call falls back to ``torch.distributed``, warns once per reason, and
:func:`fallback_reason` says why. Results are new tensors (the inputs are not modified).
"""
from __future__ import annotations

import warnings
from typing import Any

import torch
import torch.distributed as dist

from ..core.errors import InvalidInputError, UnknownNameError
from ..cost import comm_model
from ..dispatch import select
from ..ops.lowprec.quant.reference import quantize_rows
from . import runtime
from .cuda import CudaWorld
from .symmetric import MAX_CHUNKS, MAX_TILES, SymmetricWorld, new_folder

DTYPES = (torch.float32, torch.float16, torch.bfloat16)
IMPLEMENTED = {"all_reduce": ("one_shot", "two_shot", "ring"), "all_gather": ("one_shot",),
               "reduce_scatter": ("one_shot",)}
_WORLDS: dict[Any, SymmetricWorld] = {}
_REASONS: dict[Any, str] = {}
_WARNED: set[str] = set()


def _key(group: Any) -> Any:
    return dist.group.WORLD if group is None else group


def attach(group: Any = None, capacity: int = 1 << 20, timeout_s: float = 60.0, topology: str = "nvlink",
           folder: str | None = None, device: str = "cpu") -> Any:
    """Give ``group`` symmetric buffers of ``capacity`` bytes per rank (a collective: every rank of
    the group calls it). ``device="cpu"``: in shared memory, for CPU tensors; the files go in a fresh
    folder under ``folder`` (default ``/dev/shm``), removed by :func:`detach` (a process that exits
    without it leaves them). ``device="cuda"``: from ``torch.distributed``'s symmetric-memory
    allocator (:class:`.cuda.CudaWorld`, never run on a GPU), for CUDA tensors: there only the
    one-shot all-reduce runs (its flag waits inside the kernel), everything else falls back.
    ``topology`` names the :mod:`warpsmith.cost.comm_model` topology that picks algorithms
    (``nvlink``: all-to-all); ``timeout_s`` bounds every flag wait. Attaching again replaces the
    group's buffers."""
    if not dist.is_initialized():
        raise InvalidInputError("torch.distributed", "an initialized process group", "none")
    comm_model.topology(topology)
    if device not in ("cpu", "cuda"):
        raise InvalidInputError("attach device", "cpu or cuda", device)
    if device == "cuda":
        cw = CudaWorld(group, capacity, timeout_s, topology)
        old = _WORLDS.get(_key(group))
        _WORLDS[_key(group)] = cw
        if isinstance(old, SymmetricWorld):
            old.close(remove=old.rank == 0)
        return cw
    rank, world = dist.get_rank(group), dist.get_world_size(group)
    box = [str(new_folder(folder))] if rank == 0 else [None]
    dist.broadcast_object_list(box, src=dist.get_global_rank(_key(group), 0), group=group)
    w = SymmetricWorld(box[0], rank, world, capacity, timeout_s, topology).create()
    dist.barrier(group)
    old = _WORLDS.get(_key(group))
    _WORLDS[_key(group)] = w.map()
    if old is not None:
        old.close(remove=old.rank == 0)
    return w


def detach(group: Any = None) -> None:
    """Drop the group's symmetric buffers (a collective); rank 0 removes the files."""
    w = _WORLDS.pop(_key(group), None)
    if w is not None:
        dist.barrier(group)
        if isinstance(w, SymmetricWorld):
            w.close(remove=w.rank == 0)


def fallback_reason(group: Any = None) -> str | None:
    """Why the group's last collective fell back to ``torch.distributed`` (None: it did not)."""
    return _REASONS.get(_key(group))


def _check_tensor(what: str, t: Any) -> None:
    if not isinstance(t, torch.Tensor):
        raise InvalidInputError(what, "a torch.Tensor", type(t).__name__)


def _symmetric(group: Any, t: torch.Tensor, nbytes: int, cuda_ok: bool = False) -> Any:
    """The group's world if this call can use it, else None with the reason recorded and warned
    (``cuda_ok``: the call has a CUDA path, the one-shot all-reduce)."""
    w = _WORLDS.get(_key(group))
    if w is None:
        reason = ("no symmetric buffers for this group (warpsmith.comm.attach(group) sets them up in CPU "
                  "shared memory; attach(group, device='cuda') from torch's symmetric-memory allocator)")
    elif isinstance(w, CudaWorld) and t.device.type != "cuda":
        reason = f"the symmetric buffers are CUDA memory; the tensor is on {t.device}"
    elif isinstance(w, CudaWorld) and not cuda_ok:
        reason = "on CUDA only the one-shot all-reduce (no quantization) is implemented"
    elif isinstance(w, CudaWorld) and -(-t.numel() // runtime.BLOCK) > MAX_CHUNKS:
        reason = (f"the message has {t.numel()} elements; the CUDA all-reduce's flags cover {MAX_CHUNKS} chunks of "
                  f"{runtime.BLOCK}")
    elif isinstance(w, SymmetricWorld) and t.device.type != "cpu":
        reason = f"the symmetric buffers are CPU shared memory; the tensor is on {t.device}"
    elif t.dtype not in DTYPES:
        reason = f"dtype {t.dtype} (the kernels take float32, float16, bfloat16)"
    elif nbytes > w.capacity:
        reason = f"the message needs {nbytes} bytes per rank; the symmetric buffer holds {w.capacity}"
    else:
        _REASONS.pop(_key(group), None)
        return w
    _fall_back(group, reason)
    return None


def _fall_back(group: Any, reason: str, stacklevel: int = 4) -> None:
    """Record and warn (once per reason); ``stacklevel`` points the warning at the user's call."""
    _REASONS[_key(group)] = reason
    if reason not in _WARNED:
        _WARNED.add(reason)
        warnings.warn(f"warpsmith.comm falls back to torch.distributed: {reason}", RuntimeWarning,
                      stacklevel=stacklevel)


def choose(collective: str, nbytes: int, world: int, topology: str = "nvlink") -> str:
    """The implemented algorithm the alpha-beta model predicts fastest."""
    return comm_model.best(collective, nbytes, world, topology, among=IMPLEMENTED[collective])


QUANTIZE = ("int8", "fp8")


def all_reduce(t: torch.Tensor, group: Any = None, algorithm: str | None = None,
               quantize: str | None = None) -> torch.Tensor:
    """Sum of ``t`` over the group's ranks, a new tensor. 16-bit inputs are summed in fp32: one-shot
    and two-shot round the sum once; the ring rounds each hop's partial sum (as NCCL does).

    Args:
        t: any shape; the same shape and dtype on every rank.
        group: a ``torch.distributed`` process group (None: the default group).
        algorithm: ``one_shot``, ``two_shot`` or ``ring``; None: the tuning DB's record for this
            size, world, dtype and the topology given to :func:`attach` (``warpsmith tune
            all_reduce``), else the alpha-beta model's choice, with its programs and chunk size
            (:func:`tuned_config`).
        quantize: ``int8`` or ``fp8`` (e4m3): one-shot with 8-bit values and an fp32 scale per 128
            elements on the wire (:func:`.runtime.all_reduce_quantized`, whose docstring gives each
            error contract); never chosen unless asked. The fallback is exact.
    """
    _check_tensor("all_reduce input", t)
    if algorithm is not None and algorithm not in IMPLEMENTED["all_reduce"]:
        raise UnknownNameError("all_reduce algorithm", algorithm, IMPLEMENTED["all_reduce"])
    if quantize is not None and quantize not in QUANTIZE:
        raise UnknownNameError("all_reduce quantize", quantize, QUANTIZE)
    if quantize is not None and algorithm not in (None, "one_shot"):
        raise InvalidInputError(f"all_reduce algorithm with quantize={quantize!r}", "None or one_shot", algorithm)
    x = t.contiguous()
    nbytes = runtime.wire_bytes(x.numel()) if quantize else x.numel() * x.element_size()
    w = _symmetric(group, x, nbytes, cuda_ok=quantize is None and algorithm in (None, "one_shot"))
    if w is None:
        out = x.clone()
        dist.all_reduce(out, group=group)
        return out
    if isinstance(w, CudaWorld):
        return runtime.all_reduce_in_kernel(w, x)
    if quantize:
        return runtime.all_reduce_quantized(w, x, quantize)
    if algorithm is not None:
        return runtime.ALL_REDUCE[algorithm](w, x)
    algorithm, launch, _ = tuned_config(x, w.world, w.topology)
    return runtime.ALL_REDUCE[algorithm](w, x, launch)


def tuned_config(x: torch.Tensor, world: int, topology: str) -> tuple[str, runtime.Launch, str]:
    """``(algorithm, launch, source)`` of an all-reduce of ``x`` over ``world`` ranks on
    ``topology``: the tuning DB's best verified record for its (size, world, topology, dtype) when
    one exists (``source`` "db"; ``warpsmith tune all_reduce`` writes them), else the alpha-beta
    model's best algorithm, programs and chunk (``source`` "default"): :func:`warpsmith.dispatch.select`."""
    from .family import ALL_REDUCE, VARIANTS

    problem = ALL_REDUCE.problem({"N": max(1, x.numel()), "W": world}, x.dtype, {"topology": topology})
    choice = select(problem, VARIANTS)
    cfg = choice.config
    return cfg["algorithm"], runtime.Launch(cfg["programs"], cfg["chunk"]), choice.source


def all_reduce_(tensor: torch.Tensor, op: Any = None, group: Any = None, async_op: bool = False) -> Any:
    """A drop-in for ``torch.distributed.all_reduce``: same arguments, sums ``tensor`` in place and
    returns None (a tensor-parallel layer can call it where it calls ``dist.all_reduce``). An ``op``
    other than SUM, or ``async_op=True``, goes to ``torch.distributed`` (with its reason recorded)."""
    _check_tensor("all_reduce_ input", tensor)
    if (op is not None and op != dist.ReduceOp.SUM) or async_op:
        _fall_back(group, f"all_reduce_ with op={op} async_op={async_op} (the kernels sum, synchronously)",
                   stacklevel=3)
        return dist.all_reduce(tensor, op=op if op is not None else dist.ReduceOp.SUM, group=group,
                               async_op=async_op)
    tensor.copy_(all_reduce(tensor, group))
    return None


def all_gather(t: torch.Tensor, group: Any = None) -> torch.Tensor:
    """Every rank's ``t`` (same shape on every rank) concatenated along dim 0 in rank order."""
    _check_tensor("all_gather input", t)
    x = t.contiguous().reshape(t.shape if t.dim() else (1,))
    w = _symmetric(group, x, x.numel() * x.element_size())
    if w is None:
        world = dist.get_world_size(group)
        parts = [torch.empty_like(x) for _ in range(world)]
        dist.all_gather(parts, x, group=group)
        return torch.cat(parts)
    return runtime.all_gather(w, x)


def reduce_scatter(t: torch.Tensor, group: Any = None) -> torch.Tensor:
    """This rank's rows of the sum over ranks of ``t`` (dim 0 split in ``ceil(rows / world)``-row
    chunks, as ``torch.chunk``: the last ranks' shards may be short or empty)."""
    _check_tensor("reduce_scatter input", t)
    if t.dim() == 0:
        raise InvalidInputError("reduce_scatter input", "a tensor with at least one dimension", "a 0-d tensor")
    x = t.contiguous()
    w = _symmetric(group, x, x.numel() * x.element_size())
    if w is None:
        out = x.clone()
        dist.all_reduce(out, group=group)
        lo, hi = runtime.shard_rows(x.shape[0], dist.get_world_size(group), dist.get_rank(group))
        return out[lo:hi].clone()
    return runtime.reduce_scatter(w, x)


OUT_QUANTIZE = ("fp8",)


def matmul_reduce_scatter(x: torch.Tensor, weight: torch.Tensor, group: Any = None) -> torch.Tensor:
    """This rank's rows of ``sum over ranks of x @ weight^T``: a row-parallel linear's GEMM whose
    output tiles are reduce-scattered as they finish (each tile pushed to the rank owning its rows
    with a per-tile flag; the owner sums contributions in rank order, fp32, rounded once).

    Args:
        x: [M, K_r], this rank's shard of the reduction dimension (K_r may differ between ranks).
        weight: [N, K_r], the same shard of the weight; same dtype as ``x``.

    Returns:
        [rows, N] of ``x``'s dtype: rows ``[r ceil(M/W), (r+1) ceil(M/W))`` clipped to M (as
        :func:`reduce_scatter` splits them; the last ranks' may be short or empty).
    """
    _check_tensor("matmul_reduce_scatter x", x)
    _check_tensor("matmul_reduce_scatter weight", weight)
    if x.dim() != 2 or weight.dim() != 2 or x.shape[1] != weight.shape[1]:
        raise InvalidInputError("matmul_reduce_scatter x and weight", "[M, K] and [N, K] (the same K)",
                                f"{tuple(x.shape)} and {tuple(weight.shape)}")
    if weight.dtype != x.dtype:
        raise InvalidInputError("matmul_reduce_scatter weight dtype", x.dtype, weight.dtype)
    xc, wc = x.contiguous(), weight.contiguous()
    (m, _), n = xc.shape, wc.shape[0]
    world = dist.get_world_size(group) if dist.is_initialized() else 1
    w = _symmetric(group, xc, runtime.matmul_wire_bytes(m, n, world))
    if w is not None and max(runtime.matmul_tiles(m, n, world)) > MAX_TILES:
        _fall_back(group, f"the output has {max(runtime.matmul_tiles(m, n, world))} tiles per rank; the tile "
                          f"flags hold {MAX_TILES}", stacklevel=3)
        w = None
    if w is None:
        return reduce_scatter((xc.float() @ wc.float().T).to(x.dtype), group)
    return runtime.matmul_reduce_scatter(w, xc, wc)


def all_reduce_add_rms_norm(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6,
                            group: Any = None, quantize_output: str | None = None) -> tuple[torch.Tensor, ...]:
    """``s = all_reduce(x) + residual`` and ``y = rms_norm(s) * weight`` in one kernel over the
    peers' buffers (one-shot); returns ``(y, s)``, each rounded as the unfused sequence rounds.

    Args:
        x: [rows, H], this rank's partial sum (e.g. a row-parallel linear's output).
        residual: [rows, H], same dtype. weight: [H].
        quantize_output: ``fp8``: ``y`` (fp32 in the kernel, never rounded to ``x``'s dtype) is
            returned quantized to e4m3 with a per-row fp32 scale ``max|y| / 448``: the result is
            ``(y_e4m3 [rows, H] float8_e4m3fn, y_scale [rows] float32, s)``, ``y ~ y_e4m3 * y_scale``
            within half an e4m3 ulp per element (docs/ops/comm.md).
    """
    for name, v in (("x", x), ("residual", residual), ("weight", weight)):
        _check_tensor(f"all_reduce_add_rms_norm {name}", v)
    if quantize_output is not None and quantize_output not in OUT_QUANTIZE:
        raise UnknownNameError("all_reduce_add_rms_norm quantize_output", quantize_output, OUT_QUANTIZE)
    if x.dim() != 2:
        raise InvalidInputError("all_reduce_add_rms_norm x", "a 2-d tensor [rows, H]", tuple(x.shape))
    if residual.shape != x.shape or residual.dtype != x.dtype:
        raise InvalidInputError("all_reduce_add_rms_norm residual", f"shape {tuple(x.shape)} dtype {x.dtype}",
                                f"shape {tuple(residual.shape)} dtype {residual.dtype}")
    if weight.shape != (x.shape[1],):
        raise InvalidInputError("all_reduce_add_rms_norm weight", f"shape ({x.shape[1]},)", tuple(weight.shape))
    xc, fp8 = x.contiguous(), quantize_output == "fp8"
    w = _symmetric(group, xc, xc.numel() * xc.element_size())
    if w is None:
        s = all_reduce(xc, group) + residual
        sf = s.float()
        y = sf * torch.rsqrt(sf.pow(2).mean(-1, keepdim=True) + eps) * weight.float()
        if fp8:
            q, scale = quantize_rows(y, "e4m3")
            return q, scale.reshape(-1), s
        return y.to(x.dtype), s
    return runtime.all_reduce_add_rms_norm(w, xc, residual.contiguous(), weight.contiguous(), float(eps), fp8)
