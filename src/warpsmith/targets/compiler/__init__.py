"""Everything the compiler tells us about a kernel, compiled for a target with or without its GPU.

- the compile-only driver: Triton's real front end, LLVM back end and ptxas (or the AMD back end)
  for a target's architecture on a machine without its GPU, and :func:`recording` of what a
  launcher launched. It is ``warpsmith.core._compile_only``: ``warpsmith.core._triton`` makes it the
  active driver when it imports Triton (``WARPSMITH_COMPILE_ONLY``), and core, the bottom layer,
  imports nothing above it; its public names are re-exported here (on first use);
- :mod:`.facts`: :class:`KernelFacts` and :class:`ConfigFacts`, what one compiled kernel (one
  config's launch) is: registers, spills, shared memory, pipelining, grid;
- :mod:`.static`: reading them from a compiled kernel (cuobjdump and ptxas's own log for NVIDIA,
  the assembly's metadata for AMD, the TTGIR for pipelining), :func:`kernel_facts` and
  :func:`launch_facts`;
- :mod:`.sass`: the machine code of NVIDIA kernels disassembled (``nvdisasm``) and counted by
  instruction class, in and outside loops (:class:`SassCounts`, :func:`kernel_sass`);
- :mod:`.cache`: :class:`CompilerFacts`, the facts per config for the search, from a disk cache or a
  compile-only worker process (``python -m warpsmith.gpucheck --serve``), and
  :func:`compile_only_env`, the environment of such a process.

``warpsmith gpucheck`` (:mod:`warpsmith.gpucheck`) checks every library kernel against a target
with these facts.
"""
from ...core.lazy import attributes
from .cache import CompilerFacts, compile_only_env
from .facts import ConfigFacts, KernelFacts
from .sass import SassCounts, kernel_sass, nvdisasm_path
from .static import kernel_facts, launch_facts, launched, loop_loads

# from core._compile_only, imported on first use: under the interpreter nothing else imports the driver module
__getattr__ = attributes(__name__, {name: "...core._compile_only" for name in ("Launch", "gpu_target", "recording")})

__all__ = ["Launch", "gpu_target", "recording", "CompilerFacts", "compile_only_env", "ConfigFacts", "KernelFacts",
           "kernel_facts", "launch_facts", "launched", "loop_loads", "SassCounts", "kernel_sass", "nvdisasm_path"]
