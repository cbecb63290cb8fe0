"""Hardware models: the numbers the cost model and the roofline use.

Figures are vendor datasheet values for dense math (no sparsity), rounded; they
are ceilings for prediction, not measurements. Measured ceilings of a device come
from the profile suite and are labelled as such.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..core.errors import UnknownNameError


@dataclass(frozen=True)
class Throughput:
    """Per-SM issue rates the static machine-code model (``cost/static_sass.py``) prices instructions
    with; FP32 FMA and tensor-core rates come from ``Target.peak_tflops``.

    Attributes:
        clock_ghz: the boost clock the datasheet peaks are quoted at.
        sfu_per_clk: MUFU (exp2, rcp, rsqrt, sin, ...) results per SM per clock.
        int_per_clk: 32-bit integer add/multiply-add/logic results per SM per clock.
        convert_per_clk: type conversions (F2F, F2I, I2F) per SM per clock.
        issue_per_clk: warp instructions issued per SM per clock (one per sub-partition).
        smem_bytes_per_clk: shared-memory bytes per SM per clock (32 banks x 4 B).
        l2_tbps: L2 bandwidth in TB/s; None where no public figure is known.
        approximate: True where a figure is a microbenchmark estimate rather than a datasheet value.
    """

    clock_ghz: float
    sfu_per_clk: int = 16
    int_per_clk: int = 64
    convert_per_clk: int = 16
    issue_per_clk: int = 4
    smem_bytes_per_clk: int = 128
    l2_tbps: float | None = None
    approximate: bool = True

    def per_s(self, per_clk: float, sms: int) -> float:
        """A per-SM-per-clock rate, for the whole chip, per second."""
        return per_clk * sms * self.clock_ghz * 1e9


@dataclass(frozen=True)
class Target:
    """One GPU model.

    Attributes:
        name: short lower-case name used on the command line and in the DB.
        vendor: "nvidia" or "amd".
        peak_tflops: dense peak per math kind ("fp64", "fp32", "tf32", "fp16", "bf16", "fp8", "int8").
        hbm_tbps: DRAM bandwidth in TB/s.
        sms: streaming multiprocessors (NVIDIA) or compute units (AMD).
        smem_per_block: largest shared memory (LDS) one program may use, bytes.
        smem_per_sm: shared memory per SM, bytes.
        l2_bytes: last-level on-chip cache the tile model treats as L2, bytes.
        max_warps_per_sm: resident warps (wavefronts) per SM (CU).
        warp_size: threads per warp (wavefront).
        regs_per_sm: 32-bit registers per SM.
        launch_us: typical kernel launch overhead in microseconds.
        approximate: True when the model was derived from device properties, not a datasheet.
        arch: the architecture Triton compiles for (``sm_90``, ``gfx942``).
        regs_per_thread: most 32-bit registers one thread may hold (the hardware's cap; the
            per-program limit is also ``regs_per_sm`` over the program's threads).
        throughput: per-SM instruction and shared-memory rates (None: no table for this target,
            and no static machine-code model).
        max_programs_per_sm: resident programs (thread blocks) per SM.
        provenance: where the figures come from: ``nominal (datasheet)``, or ``calibrated on <gpu>
            <date>: <the figures measured>`` (``targets/calibration.py``).
    """

    name: str
    vendor: str
    peak_tflops: dict[str, float]
    hbm_tbps: float
    sms: int
    smem_per_block: int
    smem_per_sm: int
    l2_bytes: int
    max_warps_per_sm: int = 64
    warp_size: int = 32
    regs_per_sm: int = 65536
    launch_us: float = 3.0
    approximate: bool = False
    arch: str = "sm_90"
    regs_per_thread: int = 255
    throughput: Throughput | None = None
    max_programs_per_sm: int = 32
    aliases: tuple[str, ...] = field(default=(), compare=False)
    provenance: str = field(default="nominal (datasheet)", compare=False)

    def peak(self, kind: str) -> float:
        """Peak TFLOP/s for a math kind; kinds a target lacks fall back to the next wider one."""
        for k in {"fp8": ("fp8", "fp16"), "int8": ("int8", "fp16")}.get(kind, (kind,)):
            if k in self.peak_tflops:
                return self.peak_tflops[k]
        raise UnknownNameError(f"math kind for target {self.name}", kind, list(self.peak_tflops))

    def max_regs_per_thread(self, num_warps: int) -> int:
        """Registers one thread of a program of ``num_warps`` warps may hold before spilling."""
        return min(self.regs_per_thread, self.regs_per_sm // (num_warps * self.warp_size))

    def to_json(self) -> dict:
        return {
            "name": self.name, "vendor": self.vendor, "peak_tflops": dict(self.peak_tflops),
            "hbm_tbps": self.hbm_tbps, "sms": self.sms, "smem_per_block": self.smem_per_block,
            "l2_bytes": self.l2_bytes, "approximate": self.approximate,
        }


_MB = 1024 * 1024
# Per-SM rates: NVIDIA CUDA C++ Programming Guide, "Arithmetic Instructions" throughput table
# (compute capability 8.0 and 9.0: 16 MUFU results, 64 32-bit integer multiply-add/add/logic results,
# 16 conversions per SM per clock); 4 sub-partitions issue one warp instruction each per clock; shared
# memory 32 banks x 4 B per clock (Hopper and Ampere tuning guides). Clocks: the boost clocks of the
# H100 SXM5 (1.98 GHz; 67 TFLOP/s FP32 = 132 SMs x 128 lanes x 2 x 1.98 GHz) and A100 SXM4 (1.41 GHz;
# 19.5 TFLOP/s = 108 x 64 x 2 x 1.41) datasheets. L2: NVIDIA publishes no figure; ~7 TB/s for H100 SXM
# scales Chips and Cheese's H100 PCIe measurement (~5.5 TB/s, "Nvidia's H100: Funny L2, and Tons of
# Bandwidth", 2023) by SM count and clock: an estimate, uncalibrated (issue 30's microbenchmarks).
_HOPPER_RATES = Throughput(clock_ghz=1.98, l2_tbps=7.0)
_AMPERE_RATES = Throughput(clock_ghz=1.41)
_HOPPER = dict(fp64=67.0, fp32=67.0, tf32=494.7, fp16=989.4, bf16=989.4, fp8=1978.9, int8=1978.9)

TARGETS: dict[str, Target] = {
    t.name: t
    for t in (
        Target("h100", "nvidia", _HOPPER, 3.35, 132, 232448, 233472, 50 * _MB, throughput=_HOPPER_RATES,
               aliases=("h100 sxm", "h100 80gb hbm3")),
        Target("h200", "nvidia", _HOPPER, 4.8, 132, 232448, 233472, 50 * _MB, throughput=_HOPPER_RATES),
        Target(
            "a100", "nvidia", dict(fp64=19.5, fp32=19.5, tf32=156.0, fp16=312.0, bf16=312.0, int8=624.0),
            2.039, 108, 166912, 167936, 40 * _MB, arch="sm_80", throughput=_AMPERE_RATES,
        ),
        Target(
            "b200", "nvidia", dict(fp64=40.0, fp32=80.0, tf32=1100.0, fp16=2250.0, bf16=2250.0, fp8=4500.0, int8=4500.0),
            8.0, 148, 232448, 233472, 126 * _MB, arch="sm_100",
        ),
        Target(
            "mi300x", "amd", dict(fp64=163.4, fp32=163.4, tf32=653.7, fp16=1307.4, bf16=1307.4, fp8=2614.9, int8=2614.9),
            5.3, 304, 65536, 65536, 256 * _MB, max_warps_per_sm=32, warp_size=64, regs_per_sm=131072,
            arch="gfx942", regs_per_thread=512,
        ),
    )
}


def get_target(name: str) -> Target:
    """Look up a hardware model by name (case-insensitive), with the peaks a device measured where a
    calibration file applies (``targets/calibration.py``)."""
    key = name.strip().lower()
    if key in TARGETS:
        from .calibration import calibrated

        return calibrated(TARGETS[key])
    raise UnknownNameError("target", name, list(TARGETS))
