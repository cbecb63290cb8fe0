"""The static machine-code model: a kernel's time, bound and speed-of-light fraction from the
instructions its SASS holds (``targets/compiler/sass.py``) and the target's rates (``targets/models.py``).

Every figure is *predicted*: counted instructions priced at datasheet rates, never timed.

Per program, an instruction class executes ``outside + trips x inside`` times (warp instructions,
times the program's warps). A loop's trip count is not in the machine code; it is inferred from the
op's own definition where one is given: the tensor-core FLOPs one pass of the loop does against the
op's FLOPs (``flops``), else the global bytes one pass moves against the op's minimum bytes
(``bytes``), else one pass (said in ``notes``). Where loops nest (a persistent kernel's K loop inside
its loop over tiles), the inner body's passes are inferred so, and the outer loop's from the op's
output bytes over the stores one outer pass does (``out_bytes``), else one. Sibling loops are priced
as one body.

Each unit's time is its work over its chip-wide rate: tensor cores (FLOPs of the MMA instructions at
``peak_tflops`` of their type), the FP32 (FP64 at half its rate) and integer pipes (``alu``: the slower
of the two; they issue in parallel), the SFU (MUFU and conversions), instruction issue, shared memory (LDS/STS/LDSM, the
shared side of LDGSTS, and the tensor cores' operand reads from shared memory, counted in full: an
upper bound where A comes from registers), L2 (the global bytes the instructions move) and HBM (the
op's minimum bytes; the instructions' global bytes where none are given). Units tied to SMs are
slowed by the last wave's idle SMs. The predicted time is the largest unit time (the units overlap)
or the launch latency if larger; the bound names it; the speed-of-light fraction is the op's
roofline floor (its FLOPs at the tensor peak, its minimum bytes at HBM bandwidth) over that time.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from ..targets import KernelFacts, Target
from ..targets.compiler.sass import SassCounts, mma_flops

# the element type of a tensor-core instruction (its last modifier) -> (peak-table kind, operand bytes)
_MMA_TYPE = {"BF16": ("bf16", 2), "F16": ("fp16", 2), "TF32": ("tf32", 4), "E4M3": ("fp8", 1), "E5M2": ("fp8", 1),
             "S8": ("int8", 1), "U8": ("int8", 1), "F64": ("fp64", 8)}
UNITS = ("tensor", "alu", "sfu", "issue", "shared", "l2", "hbm")


@dataclass
class StaticPrediction:
    """One kernel, priced from its machine code (every figure predicted).

    Attributes:
        kernel: the kernel's name.
        ms: predicted time.
        bound: the unit that sets it (``tensor``, ``alu``, ``sfu``, ``issue``, ``shared``, ``l2``,
            ``hbm``) or ``latency`` (launch overhead).
        unit_ms: each unit's time.
        sol: the op's roofline floor over ``ms`` (None without the op's FLOPs and bytes).
        programs: programs launched (grid size); occupancy: programs resident per SM.
        trips: loop passes per program, and ``trips_from`` how they were inferred.
        flops: the tensor-core and FP32 FLOPs the instructions do; global_bytes: the global bytes they move.
        executed: warp instructions one program executes, by class (loops at their inferred trips).
        notes: what the model could not know.
    """

    kernel: str
    ms: float
    bound: str
    unit_ms: dict[str, float]
    sol: float | None
    programs: int
    occupancy: int
    trips: float
    trips_from: str
    flops: float
    global_bytes: float
    executed: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def occupancy(facts: KernelFacts, target: Target) -> int:
    """Programs of this kernel resident per SM (warps, registers, shared memory, the program cap)."""
    warps = max(1, facts.num_warps)
    limits = [target.max_warps_per_sm // warps, target.max_programs_per_sm]
    if facts.regs:
        regs = -(-facts.regs // 8) * 8  # allocated in units of 8 per thread
        limits.append(target.regs_per_sm // (regs * target.warp_size * warps))
    if facts.smem_bytes:
        limits.append(target.smem_per_sm // facts.smem_bytes)
    return max(0, min(limits))


def _mma(counts: dict[str, int]) -> tuple[float, float, dict[str, float]]:
    """(FLOPs, shared operand bytes, FLOPs per peak kind) one warp's pass over these MMA instructions does."""
    flops, smem, by_kind = 0.0, 0.0, {}
    for mnemonic, n in counts.items():
        f = mma_flops(mnemonic) * n
        kind, size = _MMA_TYPE.get(mnemonic.rsplit(".", 1)[-1], ("fp16", 2))
        flops += f
        by_kind[kind] = by_kind.get(kind, 0.0) + f
        if "GMMA" in mnemonic:  # operands read from shared memory: A (m x k) and B (n x k), a quarter per warp
            m, n_, k = (int(x) for x in mnemonic.split(".")[1].split("x"))
            smem += n * (m * k + n_ * k) * size / 4
    return flops, smem, by_kind


def _trips(sass: SassCounts, warps: int, programs: int, flops: float | None,
           nbytes: float | None) -> tuple[float, str]:
    """Passes of the innermost loop body per program (of the nested loops where loops nest)."""
    if not sass.loops:
        return 0.0, "no loop"
    nested = sass.nested_loops > 0
    body_mma = sass.nested_mma if nested else sass.loop_mma
    body_bytes = sass.nested_global_bytes if nested else sass.loop_global_bytes
    where = "inner loop" if nested else "loop"
    loop_flops = _mma(body_mma)[0] * warps
    if loop_flops and flops:
        outside = (_mma(sass.mma)[0] * warps - loop_flops)
        return (max(1.0, (flops / programs - outside) / loop_flops),
                f"the op's FLOPs over the {where}'s tensor-core FLOPs")
    if body_bytes and nbytes:
        return (max(1.0, nbytes / programs / (body_bytes * warps)),
                f"the op's minimum bytes over the {where}'s global accesses")
    return 1.0, "unknown: each loop body counted once"


def _outer_trips(sass: SassCounts, warps: int, programs: int, out_bytes: float | None) -> tuple[float, str]:
    """Passes of an outer loop per program (a persistent kernel's tiles): the op's output bytes over the
    stores one pass does, else 1."""
    if sass.loop_store_bytes and out_bytes:
        return max(1.0, out_bytes / programs / (sass.loop_store_bytes * warps)), "the op's output bytes over its stores"
    return 1.0, "unknown: one pass"


def predict(sass: SassCounts, facts: KernelFacts, target: Target, flops: float | None = None,
            nbytes: float | None = None, floor_ms: float | None = None,
            out_bytes: float | None = None) -> StaticPrediction:
    """Price one kernel's machine code on ``target``. ``flops`` and ``nbytes``: the op's FLOPs and
    minimum bytes where this kernel does the whole op (they set loop trip counts and HBM traffic);
    None for a helper kernel (its instructions' own bytes stand in). ``floor_ms``: the op's roofline
    floor (``cost.roofline``), for the speed-of-light fraction. ``out_bytes``: the op's output bytes,
    which set the passes of an outer loop around a nested one."""
    rates = target.throughput
    if rates is None:
        raise ValueError(f"target {target.name} has no instruction-rate table (targets/models.py Throughput)")
    notes: list[str] = []
    warps = max(1, facts.num_warps)
    if facts.grid is not None:
        programs = max(1, math.prod(facts.grid))
    else:
        programs = target.sms
        notes.append("grid computed at launch: one program per SM assumed")
    occ = occupancy(facts, target)
    if occ == 0:
        notes.append("does not fit on an SM (registers or shared memory)")
        occ = 1
    trips, trips_from = _trips(sass, warps, programs, flops, nbytes)
    outer = trips  # without nesting, every loop instruction runs `trips` times
    if sass.nested_loops:
        outer, why = _outer_trips(sass, warps, programs, out_bytes)
        trips_from += f"; outer loop: {outer:.3g} passes ({why})"

    def weigh(total: float, loop: float, nested: float = 0.0) -> float:
        """One program's count: outside loops once, in an outer loop ``outer`` times, nested ``trips`` times."""
        return (total - loop) + outer * (loop - nested) + trips * nested

    def executed(cls: str) -> float:  # warp instructions of a class over the whole launch
        return weigh(sass.count(cls), sass.count(cls, loop=True), sass.count(cls, nested=True)) * warps * programs

    _, all_smem, all_kind = _mma(sass.mma)
    _, loop_smem, loop_kind = _mma(sass.loop_mma)
    _, nest_smem, nest_kind = _mma(sass.nested_mma)
    scale = warps * programs
    kinds = {k: weigh(all_kind.get(k, 0.0), loop_kind.get(k, 0.0), nest_kind.get(k, 0.0)) * scale
             for k in set(all_kind) | set(loop_kind)}
    tensor_flops = sum(kinds.values())
    fp32_flops = 2.0 * (executed("fp32") + executed("fp64"))  # an upper bound: FFMA is 2, FADD/FMUL/compares 1
    global_bytes = weigh(sass.global_bytes, sass.loop_global_bytes, sass.nested_global_bytes) * scale
    shared_bytes = (weigh(sass.shared_bytes, sass.loop_shared_bytes, sass.nested_shared_bytes)
                    + weigh(all_smem, loop_smem, nest_smem)) * scale
    if sass.async_loads.get("tma"):
        notes.append("TMA copies: their boxes are not in the instruction, global bytes are undercounted")

    # the last wave's idle SMs slow every SM-bound unit
    slots = target.sms * occ
    waves = math.ceil(programs / slots)
    busy = programs / (waves * slots) if programs >= target.sms else programs / target.sms
    lane = float(target.warp_size)
    unit = {
        "tensor": sum(f / (target.peak(k) * 1e12) for k, f in kinds.items()) / busy,
        # FP64 outside the tensor cores at half the FP32 rate (H100: 34 vs 67 TFLOP/s; A100: 9.7 vs 19.5)
        "alu": (executed("fp32") + executed("fp16x2") + 2 * executed("fp64")) * lane
        / (target.peak("fp32") * 1e12 / 2) / busy,
        "sfu": (executed("sfu") * lane / rates.per_s(rates.sfu_per_clk, target.sms)
                + executed("convert") * lane / rates.per_s(rates.convert_per_clk, target.sms)) / busy,
        "issue": sum(executed(c) for c in sass.classes) / rates.per_s(rates.issue_per_clk, target.sms) / busy,
        "shared": shared_bytes / rates.per_s(rates.smem_bytes_per_clk, target.sms) / busy,
        "hbm": (nbytes if nbytes is not None else global_bytes) / (target.hbm_tbps * 1e12),
    }
    unit["alu"] = max(unit["alu"], executed("int") * lane / rates.per_s(rates.int_per_clk, target.sms) / busy)
    if rates.l2_tbps:
        unit["l2"] = global_bytes / (rates.l2_tbps * 1e12)
    if nbytes is None:
        notes.append("HBM bytes: the instructions' global bytes (L2 hits included), not the op's minimum")
    unit_ms = {k: v * 1e3 for k, v in unit.items()}
    bound = max(unit_ms, key=unit_ms.get)
    ms = unit_ms[bound]
    if target.launch_us * 1e-3 > ms:
        bound, ms = "latency", target.launch_us * 1e-3
    sol = min(1.0, floor_ms / ms) if floor_ms is not None and ms > 0 else None
    per_program = {c: executed(c) / programs for c in sass.classes}
    return StaticPrediction(sass.name, ms, bound, unit_ms, sol, programs, occ, trips, trips_from,
                            tensor_flops + fp32_flops, global_bytes, per_program, notes)


def predict_config(spec: Any, problem: Any, kernels: Any, sass: Any, target: Target) -> list[StaticPrediction | None]:
    """Each kernel of one config of ``spec``'s op at ``problem`` priced (None for a kernel without machine
    code, every one None without a rate table): the first, the config's main kernel, with the op's FLOPs,
    minimum bytes, roofline floor and output bytes; any other (a split-K reduction, say) with its
    instructions' own. ``kernels``: the config's ``KernelFacts``; ``sass``: their counts, in order."""
    from .roofline import roofline

    if target.throughput is None:
        return [None for _ in sass]
    flops, nbytes = spec.flops(problem), spec.min_bytes(problem)
    out_bytes = float(sum(math.prod(shape) * dt.itemsize for shape, dt in spec.outputs(problem)))
    floor_ms = roofline(spec, problem, target).bound_ms
    return [None if s is None else
            predict(s, k, target, flops, nbytes, floor_ms, out_bytes) if i == 0 else predict(s, k, target)
            for i, (k, s) in enumerate(zip(kernels, sass))]


def config_terms(preds: list[StaticPrediction | None]) -> dict[str, float | str]:
    """The static model's word on one config, as named facts (the learned ranker's ``static.*`` features):
    ``static.log_ms`` (log of the kernels' predicted times in sequence), ``static.sol`` and
    ``static.bound`` of the main kernel; empty where a kernel was not priced."""
    if not preds or any(p is None for p in preds):
        return {}
    ms = sum(p.ms for p in preds if p is not None)
    main = preds[0]
    out: dict[str, float | str] = {"static.log_ms": math.log(ms), "static.bound": main.bound}
    if main.sol is not None:
        out["static.sol"] = main.sol
    return out
