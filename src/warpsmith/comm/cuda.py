"""Symmetric buffers on CUDA from ``torch.distributed``'s symmetric-memory allocator
(``torch.distributed._symmetric_memory``): the world :func:`.runtime.all_reduce_in_kernel` runs on
with GPUs. **Written against the allocator's documented interface and never run on a GPU** (the
kernel it launches has run on CPU processes under Triton's interpreter and compiled for sm_90).

Every rank allocates, with ``symm_mem.empty``, a data buffer of ``capacity`` bytes and its flags,
int64 ``[2, MAX_CHUNKS]`` (ready and done per chunk, zeroed), and exchanges them with
``symm_mem.rendezvous``; the handles' ``buffer_ptrs`` (plus the tensor's offset in its allocation)
are the address tables the kernel reads peers through, as the CPU world's memory maps are. All
flags live in GPU memory and every wait is inside the kernel (``host_flags`` is False): there is no
host signal buffer, so no header check (ranks that issue different collectives are not detected
here; they time out).
"""
from __future__ import annotations

import importlib
from typing import Any

import torch
import torch.distributed as dist

from ..core.errors import InvalidInputError
from .symmetric import MAX_CHUNKS


def available() -> str | None:
    """None if this process can build a CUDA world, else why not."""
    if not torch.cuda.is_available():
        return "no CUDA device"
    try:
        importlib.import_module("torch.distributed._symmetric_memory")
    except ImportError as e:
        return f"torch.distributed._symmetric_memory does not import ({e})"
    return None


class CudaWorld:
    """The calling rank's view of the group's symmetric CUDA buffers (see the module)."""

    host_flags = False

    def __init__(self, group: Any, capacity: int, timeout_s: float, topology: str) -> None:
        why = available()
        if why is not None:
            raise InvalidInputError("a CUDA world", "CUDA and torch.distributed._symmetric_memory", why)
        import torch.distributed._symmetric_memory as symm_mem

        group = dist.group.WORLD if group is None else group
        enable = getattr(symm_mem, "enable_symm_mem_for_group", None)  # needed by older torch releases
        if enable is not None:
            enable(group.group_name)
        device = torch.device("cuda", torch.cuda.current_device())
        self.data = symm_mem.empty(capacity, dtype=torch.uint8, device=device)
        self.flags = symm_mem.empty(2 * MAX_CHUNKS, dtype=torch.int64, device=device).zero_()
        data, flags = symm_mem.rendezvous(self.data, group), symm_mem.rendezvous(self.flags, group)
        torch.cuda.synchronize()
        dist.barrier(group)  # every rank's flags are zero before anyone raises one
        self.rank, self.world = data.rank, data.world_size
        self.capacity, self.timeout_s, self.topology = capacity, float(timeout_s), topology
        self.table = torch.tensor([p + getattr(data, "offset", 0) for p in data.buffer_ptrs], dtype=torch.int64,
                                  device=device)
        self.chunk_table = torch.tensor([p + getattr(flags, "offset", 0) for p in flags.buffer_ptrs],
                                        dtype=torch.int64, device=device)
        self.chunk_flags = [flags.get_buffer(p, (2 * MAX_CHUNKS,), torch.int64) for p in range(self.world)]
        self.step, self.last_in_kernel = 0, 0
        self.broken: str | None = None
