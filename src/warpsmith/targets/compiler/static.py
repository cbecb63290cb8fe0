"""Static compilation facts: registers, spills, shared memory and pipelining of compiled kernels.

A kernel compiled by Triton (for a real GPU, or for a target in compile-only mode, see
``warpsmith.core._compile_only``) carries its PTX or AMDGCN. For NVIDIA, registers and local memory come
from the binary (the ``cuobjdump`` Triton ships, or the driver's counts after a real launch); a
kernel with local memory has its PTX assembled once more by Triton's own ``make_cubin`` (the same
ptxas and flags) with ptxas's ``-v`` log captured, for its *spill stores*: the stack frame alone
is not a spill (some kernels keep a few bytes of stack with registers to spare, and the driver's
``n_spills`` counts that frame). For AMD the
assembly's metadata lists the VGPRs and the scratch a work-item spills to. Shared memory comes from
Triton's metadata, pipelining from the TTGIR (loads inside ``scf.for`` loops, and how many
became asynchronous copies).
"""
from __future__ import annotations

import contextlib
import functools
import hashlib
import io
import os
import re
import subprocess
import tempfile
import threading
from typing import TYPE_CHECKING, Any, Mapping

from .facts import ConfigFacts, KernelFacts

if TYPE_CHECKING:
    from ...core._compile_only import Launch

_ASYNC = ("async_copy_global_to_local", "async_tma_copy", "buffer_load_to_local", "async_tma_gather")


def loop_loads(ttgir: str) -> tuple[int, int]:
    """(global loads inside loops, of which asynchronous copies) in a TTGIR module."""
    depth, loops, loads, pipelined = 0, [], 0, 0
    for line in ttgir.splitlines():
        opens, closes = line.count("{"), line.count("}")
        if loops:
            if re.search(r"=\s*tt\.load\b", line):
                loads += 1
            elif any(op in line for op in _ASYNC):
                loads += 1
                pipelined += 1
        if "scf.for" in line or "scf.while" in line:
            loops.append(depth)
        depth += opens - closes
        while loops and depth <= loops[-1]:
            loops.pop()
    return loads, pipelined


@functools.lru_cache(maxsize=1)
def _cuobjdump() -> str:
    from triton import knobs

    path = getattr(knobs.nvidia.cuobjdump, "path", None)
    if not path:
        raise RuntimeError("Triton's cuobjdump was not found (knobs.nvidia.cuobjdump)")
    return path


def cubin_resources(cubin: bytes) -> dict[str, int]:
    """``REG``, ``STACK``, ``SHARED`` and ``LOCAL`` of the (single) function in a cubin (cuobjdump)."""
    with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as f:
        f.write(cubin)
    try:
        out = subprocess.run([_cuobjdump(), "--dump-resource-usage", f.name], capture_output=True, text=True,
                             timeout=60, check=True).stdout
    finally:
        os.unlink(f.name)
    found = dict(re.findall(r"(\w+):(\d+)", next((ln for ln in out.splitlines() if "REG:" in ln), "")))
    if "REG" not in found:
        raise RuntimeError(f"cuobjdump printed no resource usage: {out.strip()[:200]}")
    return {k: int(v) for k, v in found.items()}


_ptxas_lock = threading.Lock()
_ptxas_cache: dict[str, dict[str, int]] = {}


def parse_ptxas_log(log: str) -> dict[str, int]:
    """``regs``, ``stack`` (bytes), ``spill_stores`` and ``spill_loads`` (bytes) from ``ptxas -v``."""
    regs = re.findall(r"Used (\d+) registers", log)
    if not regs:
        raise RuntimeError(f"ptxas printed no register count: {log.strip()[:300]}")
    def num(pattern: str) -> int:
        m = re.search(pattern, log)
        return int(m.group(1)) if m else 0
    return {"regs": int(regs[-1]), "stack": num(r"(\d+) bytes stack frame"),
            "spill_stores": num(r"(\d+) bytes spill stores"), "spill_loads": num(r"(\d+) bytes spill loads")}


def ptxas_resources(kernel: Any) -> dict[str, int]:
    """What ptxas reports for a compiled kernel's PTX, assembled again by Triton's own ``make_cubin``
    (the same ptxas and flags as the kernel's compilation) with its log captured; cached per kernel."""
    key = getattr(kernel, "hash", None) or hashlib.sha256(kernel.asm["ptx"].encode()).hexdigest()
    with _ptxas_lock:  # the log is printed to stdout: one assembly at a time
        if key not in _ptxas_cache:
            from triton import knobs
            from triton.compiler import make_backend

            md = kernel.metadata
            backend = make_backend(md.target)
            known = backend.parse_options({}).__dict__
            opt = backend.parse_options({k: v for k, v in md._asdict().items() if k in known})
            buf = io.StringIO()
            before, knobs.nvidia.dump_ptxas_log = knobs.nvidia.dump_ptxas_log, True
            try:
                with contextlib.redirect_stdout(buf):
                    backend.make_cubin(kernel.asm["ptx"], {}, opt, md.target.arch)
            finally:
                knobs.nvidia.dump_ptxas_log = before
            _ptxas_cache[key] = parse_ptxas_log(buf.getvalue())
        return _ptxas_cache[key]


def amdgcn_resources(asm: str) -> dict[str, int]:
    """VGPRs (arch + accumulation) and scratch bytes per work-item from AMDGCN assembly metadata.

    Scratch (``.private_segment_fixed_size``) is where spilled VGPRs go; SGPRs spill into VGPR
    lanes first (``.sgpr_spill_count``), which costs registers, not memory, and is not counted."""
    def field(name: str, default: int | None = None) -> int:
        m = re.search(rf"\.{name}:\s*(\d+)", asm)
        if m is None:
            if default is None:
                raise RuntimeError(f"AMDGCN metadata has no .{name}")
            return default
        return int(m.group(1))

    return {"vgpr": field("vgpr_count") + field("agpr_count", 0), "scratch": field("private_segment_fixed_size"),
            "vgpr_spill": field("vgpr_spill_count"), "sgpr_spill": field("sgpr_spill_count")}


def _name(fn: Any) -> str:
    inner = getattr(fn, "fn", fn)
    return getattr(inner, "__name__", repr(fn))


def kernel_facts(launch: Launch) -> KernelFacts:
    """The facts of one recorded launch's compiled kernel."""
    k = launch.kernel
    md = k.metadata
    asm: dict[str, Any] = k.asm
    loads, pipelined = loop_loads(asm["ttgir"]) if "cubin" in asm else (0, 0)
    if "ptx" in asm:
        if k.__dict__.get("n_regs") is not None:  # loaded on a real GPU: the driver's counts
            regs, local = int(k.n_regs), int(k.n_spills)
        else:
            r = cubin_resources(asm["cubin"])
            regs, local = r["REG"], r.get("STACK", 0) + r.get("LOCAL", 0)
        # no local memory: no spill; else ptxas tells spills from a stack frame kept for other uses
        spill = ptxas_resources(k)["spill_stores"] if local else 0
    elif "amdgcn" in asm:
        r = amdgcn_resources(asm["amdgcn"])
        regs, spill = r["vgpr"], r["scratch"]
    else:
        raise RuntimeError(f"compiled kernel {_name(launch.fn)} has neither a cubin nor AMDGCN ({sorted(asm)})")
    return KernelFacts(name=_name(launch.fn), num_warps=int(md.num_warps), num_stages=int(getattr(md, "num_stages", 1)),
                       regs=regs, spill_bytes=spill, smem_bytes=int(md.shared), loop_loads=loads,
                       pipelined_loads=pipelined, grid=launch.grid)


def launched(variant: Any, problem: Any, config: Mapping[str, Any], inputs: Mapping[str, Any]) -> list[Launch]:
    """Launch ``config`` once (in compile-only mode: compile it) and return what it launched, in order."""
    from ...core._compile_only import recording

    with recording() as launches:
        variant.launch(inputs, problem, config)
    if not launches:
        raise ValueError("the launcher launched no Triton kernel")
    return launches


def launch_facts(variant: Any, problem: Any, config: Mapping[str, Any], inputs: Mapping[str, Any]) -> ConfigFacts:
    """Launch ``config`` once (in compile-only mode: compile it) and read the facts of its kernels."""
    return ConfigFacts(tuple(kernel_facts(launch) for launch in launched(variant, problem, config, inputs)))
