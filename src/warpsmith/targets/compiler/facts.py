"""What the compiler says about a kernel compiled for a target: the facts cost models and
validity checks use in place of estimates (:mod:`.static` reads them from compiled kernels)."""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Mapping


@dataclass(frozen=True)
class KernelFacts:
    """One compiled kernel, as the compiler left it.

    Attributes:
        name: the ``@triton.jit`` function.
        num_warps: warps per program.
        num_stages: software-pipelining depth the kernel was compiled with.
        regs: 32-bit registers per thread (NVIDIA: ptxas's count; AMD: VGPRs).
        spill_bytes: bytes of register spill stores per thread (NVIDIA: ptxas's "spill stores";
            AMD: the scratch a work-item spills VGPRs to; SGPRs spilled into VGPR lanes cost no memory).
        smem_bytes: shared memory (LDS) per program.
        loop_loads: global loads inside loops (NVIDIA; 0 on AMD, whose pipeliner keeps plain loads).
        pipelined_loads: of those, the ones turned into asynchronous copies (``num_stages`` acts
            on these only; Triton cannot pipeline a load whose strides it does not know are
            16-element multiples).
        grid: the launch grid, where it was a tuple.
    """

    name: str
    num_warps: int
    num_stages: int
    regs: int
    spill_bytes: int
    smem_bytes: int
    loop_loads: int
    pipelined_loads: int
    grid: tuple[int, ...] | None = None

    @property
    def spills(self) -> bool:
        return self.spill_bytes > 0

    @property
    def stages_dead(self) -> bool:
        """``num_stages`` > 1 was asked for and has no effect: the loop has loads and none pipelined."""
        return self.num_stages > 1 and self.loop_loads > 0 and self.pipelined_loads == 0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @staticmethod
    def from_json(d: dict[str, Any]) -> "KernelFacts":
        grid = d.get("grid")
        return KernelFacts(**{**d, "grid": tuple(grid) if grid is not None else None})


@dataclass(frozen=True)
class ConfigFacts:
    """The kernels one launch of a variant's config compiles to, in launch order (the first is
    the main kernel; others are reductions, epilogues or chunks)."""

    kernels: tuple[KernelFacts, ...]

    @property
    def main(self) -> KernelFacts:
        return self.kernels[0]

    @property
    def spill_bytes(self) -> int:
        return max((k.spill_bytes for k in self.kernels), default=0)

    def rejection(self, config: Mapping[str, Any]) -> str | None:
        """Why the search should skip ``config`` on the compiler's word, or None: a kernel spills,
        or ``num_stages`` is a knob of the config and no load of the main kernel could be pipelined."""
        spilled = [k for k in self.kernels if k.spills]
        if spilled:
            k = spilled[0]
            return f"compiler: {k.name} spills {k.spill_bytes} B per thread ({k.regs} registers, {k.num_warps} warps)"
        # num_stages shapes the main kernel; others (a split-K reduction, say) keep their own settings
        if config.get("num_stages", 1) > 1 and self.main.stages_dead:
            return (f"compiler: {self.main.name} could not pipeline its loads (strides not known to be 16-element "
                    f"multiples): num_stages={self.main.num_stages} acts as 1")
        return None

    def to_json(self) -> list[dict[str, Any]]:
        return [k.to_json() for k in self.kernels]

    @staticmethod
    def from_json(d: list[dict[str, Any]]) -> "ConfigFacts":
        return ConfigFacts(tuple(KernelFacts.from_json(k) for k in d))
