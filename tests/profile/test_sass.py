"""The machine code of compiled kernels, counted (``targets/compiler/sass.py``), and the static model
that prices it (``cost/static_sass.py``).

Kernels whose instruction content is known are compiled for sm_90 in a compile-only subprocess (this
process imported Triton with its interpreter) and disassembled with the nvdisasm Triton ships."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from warpsmith.cost.static_sass import occupancy, predict
from warpsmith.targets import KernelFacts, get_target
from warpsmith.targets.compiler.sass import count_function, mma_flops, nvdisasm_path, parse_functions, width_bits

KERNELS = '''
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, o_ptr, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < n
    tl.store(o_ptr + i, tl.load(x_ptr + i, mask=m) + tl.load(y_ptr + i, mask=m), mask=m)


@triton.jit
def exp_kernel(x_ptr, o_ptr, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < n
    tl.store(o_ptr + i, tl.exp(tl.load(x_ptr + i, mask=m)), mask=m)


@triton.jit
def dot_kernel(a_ptr, b_ptr, c_ptr, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :])
        b = tl.load(b_ptr + (k + rk)[:, None] * BN + rn[None, :])
        acc += tl.dot(a, b)
    tl.store(c_ptr + rm[:, None] * BN + rn[None, :], acc)
'''

SCRIPT = '''
import json, torch
import warpsmith.core._triton
from warpsmith.targets.compiler import kernel_facts, kernel_sass, recording
import sass_kernels as K
x, y, o = torch.zeros(4096), torch.zeros(4096), torch.zeros(4096)
a, b = torch.zeros(128 * 256, dtype=torch.bfloat16), torch.zeros(256 * 128, dtype=torch.bfloat16)
with recording() as launches:
    K.add_kernel[(4,)](x, y, o, 4096, BLOCK=1024)
    K.exp_kernel[(4,)](x, o, 4096, BLOCK=1024)
    K.dot_kernel[(1,)](a, b, torch.zeros(128 * 128), 256, BM=128, BN=128, BK=64, num_warps=4, num_stages=3)
print(json.dumps([[kernel_facts(l).to_json(), kernel_sass(l.kernel).to_json()] for l in launches]))
'''


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    if nvdisasm_path() is None:
        pytest.skip("nvdisasm not found (Triton's backends/nvidia/bin or PATH): no machine code to count")
    tmp = tmp_path_factory.mktemp("sass")
    (tmp / "sass_kernels.py").write_text(KERNELS)
    env = {**os.environ, "WARPSMITH_COMPILE_ONLY": "sm_90", "WARPSMITH_TARGET": "h200",
           "PYTHONPATH": f"{tmp}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    env.pop("TRITON_INTERPRET", None)
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(SCRIPT)], capture_output=True, text=True, env=env,
                          cwd=tmp, timeout=300)
    if proc.returncode != 0 and "NVIDIA" not in proc.stderr and "cuda" not in proc.stderr.lower():
        pytest.fail(proc.stderr[-2000:])
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = json.loads(proc.stdout.strip().splitlines()[-1])
    return {s["name"]: (KernelFacts.from_json(f), s) for f, s in rows}


def test_vector_add_loads_and_stores_128_bits(compiled):
    _, s = compiled["add_kernel"]
    # 1024 fp32 per program over 128 threads: 8 per thread, two 128-bit loads per operand, two stores
    assert s["global_loads"] == {"128": 4} and s["global_stores"] == {"128": 2}
    assert s["classes"]["fp32"] == 8 and s["opcodes"]["FADD"] == 8
    assert s["loops"] == 0 and "tensor" not in s["classes"] and "sfu" not in s["classes"]
    assert s["global_bytes"] == 6 * 32 * 16  # six 128-bit accesses of 32 lanes


def test_exp_is_one_mufu_ex2_per_element(compiled):
    _, s = compiled["exp_kernel"]
    assert s["classes"]["sfu"] == 8 and s["opcodes"]["MUFU.EX2"] == 8
    assert s["global_loads"] == {"128": 2}


def test_dot_is_hgmma_in_a_pipelined_loop(compiled):
    facts, s = compiled["dot_kernel"]
    assert s["loops"] == 1
    # 4 warps = one warpgroup; BK=64 is four k16 steps of a 64-row HGMMA, twice for BM=128
    assert s["loop_mma"] == {"HGMMA.64x128x16.F32.BF16": 8} == s["mma"]
    assert s["async_loads"].get("128", 0) > 0 and s["loop_classes"]["async_copy"] > 0  # LDGSTS, pipelined
    assert s["classes"]["barrier"] > 0 and s["predicated_off"] > 0  # BAR.SYNC; the @!PT LDS placeholders
    assert facts.num_warps == 4 and facts.smem_bytes > 0


def test_static_model_prices_the_compiled_kernels(compiled):
    from warpsmith.targets.compiler.sass import SassCounts

    h200 = get_target("h200")
    facts, s = compiled["dot_kernel"]
    counts = SassCounts.from_json(s)
    # a 128x128 output over K=256: 2*128*128*256 FLOPs; the loop does 2*128*128*64 per pass -> 4 passes
    pred = predict(counts, facts, h200, flops=2.0 * 128 * 128 * 256, nbytes=2.0 * (128 * 256 * 2) + 4 * 128 * 128)
    assert pred.trips == pytest.approx(4.0) and pred.trips_from.startswith("the op's FLOPs")
    assert pred.bound == "latency"  # one program: far below the launch overhead
    facts_add, s_add = compiled["add_kernel"]
    big = KernelFacts(**{**facts_add.to_json(), "grid": (1 << 16,)})  # 64 Mi elements
    p_add = predict(SassCounts.from_json(s_add), big, h200, flops=float(1 << 26), nbytes=12.0 * (1 << 26),
                    floor_ms=12.0 * (1 << 26) / 4.8e12 * 1e3)
    assert p_add.bound == "hbm" and p_add.sol == pytest.approx(1.0)
    assert p_add.unit_ms["hbm"] == pytest.approx(12.0 * (1 << 26) / 4.8e12 * 1e3)


LISTING = """
//--------------------- .text.k          --------------------------
	.section	.text.k,"ax",@progbits
k:
.text.k:
        /*0000*/                   S2R R0, SR_TID.X ;
        /*0010*/              @!PT LDS RZ, [RZ] ;
.L_x_1:
        /*0020*/                   LDG.E.64 R2, desc[UR4][R4.64] ;
        /*0030*/                   MUFU.EX2 R2, R2 ;
        /*0040*/                   FFMA R3, R2, R2, R3 ;
        /*0050*/              @P0 BRA `(.L_x_1) ;
        /*0060*/                   STG.E.U16 desc[UR4][R4.64], R3 ;
        /*0070*/                   EXIT ;
.L_x_2:
        /*0080*/                   BRA `(.L_x_2);
        /*0090*/                   NOP;
"""


def test_counting_a_listing_finds_loops_widths_and_dead_instructions():
    (name, (insns, labels)), = parse_functions(LISTING).items()
    c = count_function(name, insns, labels)
    assert name == "k" and c.loops == 1  # the BRA to itself after EXIT is the trap, not a loop
    assert c.instructions == 7 and c.predicated_off == 1 and c.predicated == 1
    assert c.loop_classes == {"global_load": 1, "sfu": 1, "fp32": 1, "control": 1}
    assert c.global_loads == {"64": 1} == c.loop_global_loads and c.global_stores == {"16": 1}
    assert c.global_bytes == 64 * 4 + 16 * 4 and c.loop_global_bytes == 64 * 4


def test_widths_and_mma_flops():
    from warpsmith.targets.compiler.sass import Instruction

    assert width_bits(Instruction(0, "LDG", ".E.128.CONSTANT", "", "")) == 128
    assert width_bits(Instruction(0, "LDSM", ".16.M88.4", "", "")) == 128
    assert width_bits(Instruction(0, "LDG", ".E", "", "")) == 32
    assert mma_flops("HGMMA.64x128x16.F32.BF16") == 2 * 64 * 128 * 16 / 4  # a warpgroup's, per warp
    assert mma_flops("HMMA.16816.F32.BF16") == 2 * 16 * 8 * 16


def test_occupancy_is_the_tightest_resource():
    h200 = get_target("h200")
    k = KernelFacts("k", num_warps=8, num_stages=3, regs=126, spill_bytes=0, smem_bytes=98304, loop_loads=2,
                    pipelined_loads=2, grid=(1024, 1))
    assert occupancy(k, h200) == 2  # 233472 B of shared memory / 98304; registers allow 2 as well
    assert occupancy(KernelFacts(**{**k.to_json(), "smem_bytes": 0, "regs": 32}), h200) == 8  # 64 warps / 8
    with pytest.raises(ValueError, match="no instruction-rate table"):
        predict(count_function("k", [], {}), k, get_target("mi300x"))


NESTED = """
	.section	.text.p,"ax",@progbits
p:
        /*0000*/                   S2R R0, SR_TID.X ;
.L_x_0:
        /*0010*/                   LDGSTS.E.BYPASS.128 [R1], desc[UR4][R2.64] ;
.L_x_1:
        /*0020*/                   LDGSTS.E.BYPASS.128 [R1], desc[UR4][R2.64] ;
        /*0030*/                   HGMMA.64x64x16.F32.BF16 R24, gdesc[UR8].tnspB, R24 ;
        /*0040*/              @P0 BRA `(.L_x_1) ;
        /*0050*/                   STG.E.128 desc[UR4][R4.64], R24 ;
        /*0060*/              @P1 BRA `(.L_x_0) ;
        /*0070*/                   EXIT ;
"""


def test_a_persistent_kernels_nested_loops_are_priced_apart():
    """The tile loop's prologue load and epilogue store run once per tile, the K loop's body once per
    K step: flattening them would charge every K step a tile's store."""
    from warpsmith.targets.compiler.sass import SassCounts

    (name, (insns, labels)), = parse_functions(NESTED).items()
    c = count_function(name, insns, labels)
    assert c.loops == 2 and c.nested_loops == 1
    assert c.nested_mma == {"HGMMA.64x64x16.F32.BF16": 1} and c.nested_global_bytes == 512
    assert c.loop_global_bytes == 3 * 512 and c.loop_store_bytes == 512  # two loads, one store
    h200 = get_target("h200")
    k = KernelFacts("p", num_warps=4, num_stages=1, regs=64, spill_bytes=0, smem_bytes=0, loop_loads=2,
                    pipelined_loads=2, grid=(132,))
    # 132 programs x 4 tiles x 64 K steps; a tile writes 4 warps x 512 B
    flops = 132 * 4 * 64 * 2.0 * 64 * 64 * 16
    pred = predict(c, k, h200, flops=flops, nbytes=1e9, out_bytes=132 * 4 * 4 * 512.0)
    assert pred.trips == pytest.approx(4 * 64) and "outer loop: 4 passes" in pred.trips_from
    # global bytes per warp: the K loop's load 256 times, the tile loop's load and store 4 times each
    assert pred.global_bytes == pytest.approx((256 * 512 + 4 * 2 * 512) * 4 * 132)
    assert SassCounts.from_json(c.to_json()) == c
