"""Static compilation for a GPU target with no GPU: the compile-only driver, the resource facts read
from real cubins, the source scan for globals compiled Triton rejects, and `warpsmith gpucheck`.

The compile-only parts run in subprocesses: this process imported Triton with its interpreter."""
from __future__ import annotations

import importlib.util
import math
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from warpsmith.gpucheck import unstable_globals
from warpsmith.ops import OPS, variants
from warpsmith.targets import ConfigFacts, KernelFacts, get_target
from warpsmith.targets.compiler import loop_loads

NAN_KERNEL = '''
import triton
import triton.language as tl

_NAN = tl.constexpr(float("nan"))


@triton.jit
def fill_kernel(x_ptr, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + i, tl.full([BLOCK], _NAN, tl.float32), mask=i < n)


@triton.jit
def fill_literal_kernel(x_ptr, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + i, tl.full([BLOCK], float("nan"), tl.float32), mask=i < n)
'''


def _module(tmp_path: Path, name: str, source: str):
    path = tmp_path / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def _compile_only(script: str, tmp_path: Path, arch: str = "sm_90") -> subprocess.CompletedProcess:
    env = {**os.environ, "WARPSMITH_COMPILE_ONLY": arch, "WARPSMITH_TARGET": "h200",
           "PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    env.pop("TRITON_INTERPRET", None)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(script)], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=300)


def test_scan_flags_a_nan_global_and_passes_the_library(tmp_path):
    mod = _module(tmp_path, "nan_kernels", NAN_KERNEL)
    found = unstable_globals([mod])
    assert len(found) == 1 and "fill_kernel reads global _NAN" in found[0]
    library = {m for op in OPS for v in variants(op).values() for m in v.kernel_modules}
    assert len(library) >= 7
    assert unstable_globals(library) == []


def test_compile_only_launch_catches_what_the_interpreter_cannot(tmp_path):
    """The NaN global compiles, then fails Triton's launch-time check (the RoPE bug's class); the
    literal NaN launches twice; the facts come from the real cubin."""
    (tmp_path / "nan_kernels.py").write_text(NAN_KERNEL)
    proc = _compile_only('''
        import json, torch
        from warpsmith.core._triton import COMPILE_ONLY_ARCH, INTERPRET
        from warpsmith.targets.compiler import kernel_facts, recording
        import nan_kernels as K
        assert COMPILE_ONLY_ARCH == "sm_90" and not INTERPRET
        x = torch.zeros(1000)
        try:
            K.fill_kernel[(1,)](x, 1000, BLOCK=1024)
            print("NAN-GLOBAL-LAUNCHED")
        except RuntimeError as e:
            print("NAN-GLOBAL-REJECTED", "has changed" in str(e))
        for _ in range(2):
            with recording() as launches:
                K.fill_literal_kernel[(1,)](x, 1000, BLOCK=1024, num_warps=4)
        f = kernel_facts(launches[0])
        print("FACTS", json.dumps(f.to_json()))
        print("UNTOUCHED", bool(torch.all(x == 0)))
    ''', tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "NAN-GLOBAL-REJECTED True" in proc.stdout
    facts = json.loads(proc.stdout.split("FACTS ")[1].splitlines()[0])
    assert facts["name"] == "fill_literal_kernel" and facts["num_warps"] == 4 and facts["grid"] == [1]
    assert 0 < facts["regs"] <= 255 and facts["spill_bytes"] == 0
    assert "UNTOUCHED True" in proc.stdout  # compile-only: nothing ran


def test_loop_loads_counts_loads_inside_loops_only():
    ttgir = """
    %0 = tt.load %a : tensor<16x!tt.ptr<f16>>
    %1 = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %z) -> (tensor<16xf32>) : i32 {
      %2 = tt.load %p : tensor<16x!tt.ptr<f16>>
      %3 = ttg.async_copy_global_to_local %q, %buf : tensor<16x!tt.ptr<f16>> -> !ttg.memdesc<16xf16>
      scf.yield %acc : tensor<16xf32>
    }
    %4 = tt.load %b : tensor<16x!tt.ptr<f16>>
    """
    assert loop_loads(ttgir) == (2, 1)
    assert loop_loads("%0 = tt.load %a") == (0, 0)


def _facts(**kw) -> ConfigFacts:
    base = dict(name="k", num_warps=4, num_stages=3, regs=128, spill_bytes=0, smem_bytes=1024, loop_loads=2,
                pipelined_loads=2)
    return ConfigFacts((KernelFacts(**{**base, **kw}),))


def test_config_facts_rejections():
    assert _facts().rejection({"num_stages": 3}) is None
    assert "spills 64 B" in _facts(spill_bytes=64).rejection({})
    dead = _facts(pipelined_loads=0)
    assert "num_stages=3 acts as 1" in dead.rejection({"num_stages": 3})
    assert dead.rejection({}) is None  # num_stages not a knob of this config: nothing to skip
    assert _facts(pipelined_loads=1).rejection({"num_stages": 3}) is None  # partly pipelined: the knob acts


def test_register_limit_depends_on_warps():
    h = get_target("h200")
    assert h.max_regs_per_thread(4) == 255 and h.max_regs_per_thread(16) == 128 and h.max_regs_per_thread(32) == 64
    assert get_target("mi300x").max_regs_per_thread(4) == 512


def test_gpucheck_cli_compiles_for_sm90(tmp_path):
    """`warpsmith gpucheck` on the ops whose defaults spilled (softmax at N = 65536: 32 warps leave
    64 registers a thread) and the one that failed every launch (RoPE): passes, with facts."""
    out = tmp_path / "gc.json"
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    proc = subprocess.run([sys.executable, "-m", "warpsmith.cli.main", "gpucheck", "--target", "h200", "--ops",
                           "softmax,rope", "--dtypes", "float16", "--sample", "0", "--quiet", "--json", str(out)],
                          capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    doc = json.loads(out.read_text())
    assert doc["ok"] and doc["arch"] == "sm_90" and doc["target"] == "h200"
    names = {k["kernel"] for k in doc["kernels"]}
    assert {"rope_kernel", "softmax_single_pass_kernel", "softmax_online_kernel"} <= names
    rows = [r for r in doc["rows"] if r["op"] == "softmax" and "N=65536" in r["problem"]]
    assert rows and all(r["variant"] == "online" for r in rows if r["kind"] == "default")
    assert all(k["spill_bytes"] == 0 for r in doc["rows"] for k in r["kernels"])


def test_gpucheck_cli_rejects_bad_input():
    for args, what in ((["--target", "v100"], "target"), (["--ops", "nope"], "op"), (["--dtypes", "int3"], "dtype")):
        proc = subprocess.run([sys.executable, "-m", "warpsmith.cli.main", "gpucheck", *args],
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 2, (args, proc.stdout, proc.stderr)
        assert what in proc.stderr.lower()


def test_cost_models_use_the_compilers_facts():
    """Registers from the compiler lower occupancy; an unpipelined K loop costs what num_stages=1 costs;
    a spill or a dead num_stages is not a candidate."""
    from warpsmith.cost.cost import predict_ms
    from warpsmith.cost.gemm_model import math_efficiency, pipelined_fraction
    from warpsmith.ops import get_op, get_variant

    h100 = get_target("h100")
    p = get_op("matmul").problem({"M": 4096, "N": 4096, "K": 4096}, "float16")
    v = get_variant("matmul", "tiled")
    c = dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=8, num_warps=4, num_stages=2, EVEN_K=True, PRECISION="ieee")
    smem = v.smem_bytes(p, c)  # 64 KiB: three programs an SM by shared memory, two by 255 registers
    light = _facts(regs=64, smem_bytes=smem, loop_loads=2, pipelined_loads=2)
    heavy = _facts(regs=255, smem_bytes=smem, loop_loads=2, pipelined_loads=2)
    half = _facts(regs=64, smem_bytes=smem, loop_loads=2, pipelined_loads=1)
    assert predict_ms(v, p, c, h100, light) <= predict_ms(v, p, c, h100)
    assert predict_ms(v, p, c, h100, heavy) > predict_ms(v, p, c, h100, light)  # two programs an SM, not three
    assert predict_ms(v, p, c, h100, half) >= predict_ms(v, p, c, h100, light)
    assert math_efficiency(c, pipelined_fraction(p, half)) < math_efficiency(c, pipelined_fraction(p, light))
    assert math.isinf(predict_ms(v, p, c, h100, _facts(spill_bytes=8)))
    assert math.isinf(predict_ms(v, p, c, h100, _facts(pipelined_loads=0)))
    # the memory model takes the compiler's registers for occupancy
    sm = get_variant("softmax", "online")
    q = get_op("softmax").problem({"M": 8192, "N": 8192}, "bfloat16")
    cfg = sm.default_config(q, h100)
    few = ConfigFacts((KernelFacts("k", cfg["num_warps"], 1, 32, 0, 0, 0, 0),))
    many = ConfigFacts((KernelFacts("k", cfg["num_warps"], 1, 255, 0, 0, 0, 0),))
    assert predict_ms(sm, q, cfg, h100, many) >= predict_ms(sm, q, cfg, h100, few)


def test_odd_strides_make_num_stages_a_dead_knob():
    from warpsmith.cost.gemm_model import pipelined_fraction
    from warpsmith.ops import get_op, get_variant

    spec, v, h100 = get_op("matmul"), get_variant("matmul", "tiled"), get_target("h100")
    odd = spec.problem({"M": 257, "N": 129, "K": 300}, "float16")  # neither K nor N a multiple of 16
    half = spec.problem({"M": 256, "N": 129, "K": 320}, "float16")  # A's rows aligned, B's not
    assert pipelined_fraction(odd) == 0 and pipelined_fraction(half) == 0.5
    assert pipelined_fraction(spec.problem({"M": 300, "N": 64, "K": 64}, "float16", {"layout": "tn"})) == 0.5
    assert v.space(odd, h100).default()["num_stages"] == 1 and v.space(odd, h100).size() < v.space(half, h100).size()


def test_search_with_compiler_facts_skips_what_spills(tmp_path):
    """A compile-only worker compiles each evaluated config for sm_90; a config the register estimate
    lets through but ptxas spills (found by `warpsmith gpucheck`) is scored inf with the compiler's
    reason, and the facts are cached on disk."""
    from warpsmith.targets.compiler import CompilerFacts
    from warpsmith.measure import Evaluator
    from warpsmith.ops import get_op, variants

    spec, h200 = get_op("matmul"), get_target("h200")
    p = spec.problem({"M": 4096, "N": 4096, "K": 4096}, "float32")
    ev = Evaluator(spec, p, variants("matmul"), h200, measured=False)
    ev.facts = CompilerFacts(h200, cache_dir=tmp_path)
    spills = dict(variant="persistent", BLOCK_M=256, BLOCK_N=16, BLOCK_K=128, GROUP_M=1, num_warps=8, num_stages=1,
                  EVEN_K=False, PRECISION="tf32", PROGRAMS_PER_SM=2)  # ptxas: 255 registers and 40 B of spill
    fine = dict(variant="tiled", BLOCK_M=128, BLOCK_N=128, BLOCK_K=32, GROUP_M=8, num_warps=8, num_stages=3,
                EVEN_K=True, PRECISION="tf32")
    assert ev.predict(spills).error is None  # the estimate alone does not see it
    bad, good = ev.evaluate([spills, fine])
    ev.facts.close()
    assert math.isinf(bad.ms) and bad.error.startswith("compiler:") and "spills" in bad.error, bad.error
    assert good.error is None and math.isfinite(good.ms) and good.facts.main.regs > 0
    assert good.facts.main.pipelined_loads == good.facts.main.loop_loads > 0
    assert len(list(tmp_path.rglob("*.json"))) == 2
    again = CompilerFacts(h200, cache_dir=tmp_path)
    assert again.lookup(ev.variants["tiled"], p, {k: x for k, x in fine.items() if k != "variant"}) == good.facts


def test_only_the_main_kernel_decides_whether_num_stages_acts():
    """A split-K reduction keeps Triton's default stages and has nothing to pipeline: that must not
    reject a config whose main kernel pipelines (found by benchmarks/compiler_facts_ranking.py)."""
    main = KernelFacts("matmul_splitk_kernel", 4, 3, 128, 0, 1024, 2, 2)
    reduce = KernelFacts("matmul_splitk_reduce_kernel", 4, 3, 40, 0, 0, 1, 0)
    assert ConfigFacts((main, reduce)).rejection({"num_stages": 3}) is None
    dead_main = KernelFacts("matmul_splitk_kernel", 4, 3, 128, 0, 1024, 2, 0)
    assert "acts as 1" in ConfigFacts((dead_main, reduce)).rejection({"num_stages": 3})


def test_gpucheck_counts_a_problem_without_a_valid_default_as_failed(monkeypatch):
    """A problem whose default config every variant rejects (a call would have nothing to run) was dropped
    silently, and the report said 0 failed; it is a failed row naming the reason (nothing is compiled)."""
    from warpsmith import gpucheck

    v = variants("attention_decode_mla")["split_kv"]
    rejected = {"BLOCK_N": 128, "NUM_SPLITS": 1, "BLOCK_H": 16, "num_warps": 8, "num_stages": 4}  # 576 KB of tiles
    monkeypatch.setattr(v, "default_config", lambda problem, target: dict(rejected))
    problem = {"op": "attention_decode_mla", "shape": {"B": 1, "H": 16, "S": 16, "Dc": 512, "Dr": 64},
               "dtype": "bfloat16", "attrs": {"page_size": 16}}
    seen = []
    rows = gpucheck.run([problem], "h100", sample=0, seed=0, progress=seen.append)
    bad = [r for r in rows if not r.ok]
    assert len(bad) == 1 and bad[0].kind == "default" and bad[0].op == "attention_decode_mla" and seen == bad
    assert "no valid default config" in bad[0].errors[0] and "shared memory" in bad[0].errors[0], bad[0].errors
    assert bad[0].config == rejected and not bad[0].kernels
    table = gpucheck._table(rows, gpucheck.summary(rows))
    assert "FAIL attention_decode_mla/split_kv [default]" in table and "1 failed" in table, table
