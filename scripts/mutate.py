#!/usr/bin/env python
"""Mutation testing: plant small bugs in a copy of the tree and check the tests kill each one.

Each mutation names a file, an exact snippet of it (which must occur once), its replacement, and
the tests that must fail once it is applied. For each, the tree (``src``, ``tests``,
``benchmarks``, ``pyproject.toml``) is copied to a temporary directory, the mutation applied there
(the working tree is never changed), and the selected tests run with a timeout: a failing run
kills the mutation; a passing one lets it survive. The unmutated copy first runs the union of the
selections (the baseline), so a kill is never a test that fails anyway.

Usage::

    python scripts/mutate.py                 # every mutation, two at a time
    python scripts/mutate.py --only 3 7      # some of them (by number)
    python scripts/mutate.py --list          # print them

Exit 0 when every mutation is killed, 1 when one survives, 2 when the baseline fails.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COPY = ("src", "tests", "benchmarks", "pyproject.toml")


@dataclass(frozen=True)
class Mutation:
    area: str
    file: str
    original: str
    replacement: str
    tests: tuple[str, ...]  # pytest arguments (paths, node ids, -k expressions)
    why: str


C = "src/warpsmith/core/error_contract.py"
V = "src/warpsmith/verify/verifier.py"
H = "src/warpsmith/verify/harness.py"
P = "src/warpsmith/verify/symbolic/prove.py"
T = "src/warpsmith/verify/symbolic/tracer.py"
G = "src/warpsmith/check/guards.py"
CONTRACT_TESTS = ("tests/core/test_error_contract.py",)
RED_TEAM = "tests/check/test_redteam_misc.py"

MUTATIONS: tuple[Mutation, ...] = (
    # ---- contracts ------------------------------------------------------------------------------
    Mutation("contract", C, "where(compare & ~torch.isnan(scale64), zero)", "where(compare, zero)",
             CONTRACT_TESTS, "a NaN error scale hides the worst element again"),
    Mutation("contract", C, "if excess.numel() and not bool(excess.flatten()[worst] <= 1.0):", "if False:",
             CONTRACT_TESTS, "the worst-case criterion disabled"),
    Mutation("contract", C, "if self.ref_factor is not None and ref_in_dtype is not None and err.numel():",
             "if False:", CONTRACT_TESTS, "the reference-factor criterion disabled"),
    Mutation("contract", C, "if wrong_inf.any() or stray.any():", "if wrong_inf.any():",
             CONTRACT_TESTS, "stray infinities accepted"),
    Mutation("contract", C, "stray = stray & ~(torch.isinf(r) & (torch.sign(o) == torch.sign(r)))",
             "stray = stray & ~torch.isinf(r)", CONTRACT_TESTS, "an overflow of either sign accepted"),
    Mutation("contract", C, "expect = ref64.to(out.dtype).to(torch.float64)  # the oracle rounded",
             "expect = (ref_in_dtype if ref_in_dtype is not None else ref64.to(out.dtype)).to(torch.float64)  #",
             ("tests/verify/test_cpu_capability.py", "-k", "correct_kernel"),
             "special values judged against the working-dtype reference (ISA-dependent)"),
    Mutation("contract", C, "return bool(err <= allowed), allowed", "return True, allowed",
             CONTRACT_TESTS, "within_reference always true"),
    # ---- verifier and harness -------------------------------------------------------------------
    Mutation("verifier", V, "reruns = [done[0]] * (DETERMINISM_RUNS - 1) + done[1:]", "reruns = [done[0]]",
             ("tests/verify/test_verifier.py", "-k", "planted"), "determinism re-runs only the first inputs"),
    Mutation("verifier", V, "for i, (a, b) in enumerate(zip(out, again)):",
             "for i, (a, b) in enumerate(zip(out[:1], again[:1])):",
             ("tests/verify/test_verifier.py", "-k", "secondary"), "determinism compares the first output only"),
    Mutation("verifier", V, "tiny = one_sm(target)", "tiny = target",
             ("tests/verify/test_grid_stride.py", "-k", "overwrites"), "the grid-stride check on the full target"),
    Mutation("verifier", V, "{a: blocks.get(a, 16) + 1 for a in required}", "{a: blocks.get(a, 16) for a in required}",
             ("tests/verify/test_verifier.py", "-k", "tail or odd_problems"), "odd shapes become block multiples"),
    Mutation("verifier", V, "    return all(torch.equal(r32.to(torch.float64), r64) for r32, r64 in",
             "    return True or all(torch.equal(r32.to(torch.float64), r64) for r32, r64 in",
             ("tests/verify/test_verifier.py", "-k", "exactness"), "exactness declared, not detected"),
    Mutation("verifier", V, 'if cert.deterministic and differs:', 'if False:',
             ("tests/verify/test_verifier.py", "-k", "planted"), "determinism never fails"),
    Mutation("verifier", H, "        if not same:\n            raise HarnessFailure(f\"input {k!r} was modified\")",
             "        if False:\n            raise HarnessFailure(f\"input {k!r} was modified\")",
             ("tests/verify/test_verifier.py", "-k", "planted"), "modified inputs unnoticed"),
    Mutation("verifier", H, "return int(_sum(_logical_and(_isnan(out), _logical_not(_isnan(ref)))))", "return 0",
             ("tests/verify/test_verifier.py", "-k", "planted"), "poison survival unnoticed"),
    # ---- prover -----------------------------------------------------------------------------------
    Mutation("prover", P, 'return Obligation("race_free", base, "failed", f"stores #{i} and #{j} hit one address"',
             'return Obligation("race_free", base, "proved", f"stores #{i} and #{j} hit one address"',
             ("tests/verify/test_prove.py",), "a race reported as proved"),
    Mutation("prover", P, 'return Obligation("coverage", base, "failed", "an output element no program writes"',
             'return Obligation("coverage", base, "proved", "an output element no program writes"',
             ("tests/verify/test_prove.py",), "a coverage hole reported as proved"),
    Mutation("prover", P, 'return Obligation("in_bounds", subject, "failed", "mask true, address outside the tensor"',
             'return Obligation("in_bounds", subject, "proved", "mask true, address outside the tensor"',
             ("tests/verify/test_prove.py", "-k", "cli or bug"), "an out-of-bounds access reported as proved"),
    Mutation("prover", T, "up = z3.If(hi > lo, (hi - lo + step - 1) / step, 0)",
             "up = z3.If(hi > lo, (hi - lo) / step, 0)",
             ("tests/verify/test_prove.py",), "the last partial trip of a loop not modelled"),
    # ---- tuning DB and dispatch -------------------------------------------------------------------
    Mutation("db", "src/warpsmith/db/store.py", '"variant", "config", "fingerprint",', '"variant", "config",',
             ("tests/db/test_db_store.py", "-k", "fingerprint"), "import de-duplication ignores the fingerprint"),
    Mutation("db", "src/warpsmith/db/store.py",
             'r.fingerprint.get("source_hash") == source_hashes[r.variant]', "True",
             ("tests/ops/test_matmul_op.py", "-k", "stale"), "records of a changed kernel source used"),
    Mutation("dispatch", "src/warpsmith/dispatch.py",
             "if vs[rec.variant].rejection(problem, rec.config, target) is None:",
             "if not vs[rec.variant].failed_guards(problem, rec.config):",
             ("tests/ops/test_matmul_op.py", "-k", "invalid_for_the_call"), "dispatch checks guards only"),
    Mutation("dispatch", "src/warpsmith/dispatch.py",
             "if vs[rec.variant].rejection(problem, rec.config, target) is None:", "if True:",
             ("tests/ops/test_matmul_op.py", "-k", "dispatch"), "dispatch checks nothing"),
    # ---- kernels ----------------------------------------------------------------------------------
    Mutation("kernel", "src/warpsmith/ops/norm/kernel.py", "        dw += tdw\n        db += tdb\n",
             "        dw = tdw\n        db = tdb\n",
             ("tests/verify/test_grid_stride.py", "-k", "striding and norm_backward"),
             "persistent norm backward overwrites its accumulators"),
    Mutation("kernel", "src/warpsmith/ops/matmul/kernel.py",
             "a = tl.load(a_ptrs, mask=mask_m[:, None] & mask_k[None, :], other=0.0)",
             "a = tl.load(a_ptrs, mask=mask_m[:, None], other=0.0)",
             ("tests/verify/test_verifier.py", "-k", "correct_config"), "GEMM reads A past K"),
    Mutation("kernel", "src/warpsmith/ops/softmax/kernel.py", "base = tl.maximum(m_new, -FLT_MAX)", "base = m_new",
             ("tests/ops/test_softmax_kernels.py", "-k", "first_chunk"), "online softmax NaN on an all -inf chunk"),
    Mutation("kernel", "src/warpsmith/ops/activation/kernel.py",
             "return tl.exp(tl.minimum(x, 0.0)) / (1.0 + tl.exp(-tl.abs(x)))", "return 1.0 / (1.0 + tl.exp(-x))",
             ("tests/ops/test_activation_kernels.py", "-k", "far_tails"), "sigmoid underflows to 0 in the far tail"),
    Mutation("kernel", "src/warpsmith/ops/cross_entropy/kernel.py",
             "sc = tl.load(s_ptr + rows.to(tl.int64) * stride_s, mask=row_mask, other=0.0)",
             "sc = tl.load(s_ptr + rows.to(tl.int64), mask=row_mask, other=0.0)",
             ("tests/ops/test_cross_entropy_op.py", "-k", "strided_upstream"),
             "cross-entropy backward ignores the upstream gradient's stride"),
    # ---- the check harness (isolation) ----------------------------------------------------------
    Mutation("check", "src/warpsmith/check/isolation.py", "            self.launcher.wait(timeout=0.02)",
             "            raise subprocess.TimeoutExpired('', 0)",
             ("tests/check/test_check.py", "-k", "kill_parent"), "a killed launcher goes unnoticed"),
    Mutation("check", "src/warpsmith/check/child.py", "a.data.copy_(b)", "a.copy_(b)",
             ("tests/check/test_check.py", "-k", "memo_version"), "the refill bumps the version counter"),
    Mutation("check", "src/warpsmith/check/hardened.py", '"plain": plain,', '"plain": False,',
             ("tests/check/test_check.py", "-k", "mode_sensing"), "every call runs under the harness's modes"),
    Mutation("check", "src/warpsmith/check/hardened.py", '            self.recheck("after the calls")',
             "            pass", ("tests/check/test_check.py", "-k", "late_worker"), "no late re-read"),
    Mutation("check", C, "allowed = factor * max(ref_err, sensitivity)", "allowed = factor * ref_err",
             ("tests/core/test_error_contract.py", "-k", "backward_stable"), "the reference criterion without its floor"),
    Mutation("check", "src/warpsmith/check/hardened.py",
             "        if not all(bitwise_equal(a, b) for a, b in zip(*outs)):", "        if False:",
             ("tests/check/test_check.py", "-k", "dropout"), "a nondeterministic reference blamed on the candidate"),
    Mutation("check", "src/warpsmith/check/hardened.py", "            p.write_bytes(originals[p])",
             "            pass", ("tests/check/test_check.py", "-k", "rewritten_reference"),
             "a rewritten reference stays rewritten"),
    # ---- the check harness: red team (tests/check/test_redteam_misc.py) ---------------------------
    # (dropping only ``b is None or`` would be an equivalent mutant: bitwise_equal(tensor, None) is False)
    Mutation("check", "src/warpsmith/check/hardened.py",
             "if a is not None and (b is None or not bitwise_equal(a, b)):",
             "if a is not None and (b is not None and not bitwise_equal(a, b)):",
             (RED_TEAM, "-k", "reread"), "an output the re-read returns as None is not counted as a change"),
    Mutation("check", "src/warpsmith/check/compare.py", "err = _where(mask, _abs(_sub(o, y)), zero)",
             "err = _where(mask, _abs(_sub(o, r)), zero)", (RED_TEAM, "-k", "fp64_oracle"),
             "the error measured against the working-dtype reference, not the fp64 oracle"),
    Mutation("contract", C, "return self.u_out * ref64.abs() + rel * scale64",
             "return self.u_out * ref64.abs().max() + rel * scale64", (RED_TEAM, "-k", "own_magnitude"),
             "u_out * max|y| for every element instead of u_out * |y|"),
    Mutation("check", G, "                if k in own:\n                    continue",
             "                if False:\n                    continue", (RED_TEAM, "-k", "numeric_settings_at_import"),
             "deterministic algorithms, tf32, matmul precision and default dtype reported as patches again"),
    Mutation("check", G, "elif now is not v and not follows_default_dtype(m, k, now):", "elif now is not v:",
             (RED_TEAM, "-k", "default_dtype"), "torch.Storage rebound by set_default_dtype reported as a patch"),
    Mutation("check", G, 'return f"{what}(...) (a new side stream)"', "return None",
             (RED_TEAM, "-k", "side_stream_is_async_work"), "a side stream asked for on a CPU is candidate_error"),
    Mutation("check", G, 'if extra.get("stream_id") == 0 or (ptr is not None and ptr in _DEFAULT_HANDLES):',
             "if False:", (RED_TEAM, "-k", "side_stream_attempts"),
             "a default stream's handle counted as a side stream"),
    Mutation("check", "src/warpsmith/check/hardened.py", "if isinstance(side, str) and side:", "if False:",
             (RED_TEAM, "-k", "side_stream_is_async_work"), "the child's side-stream report ignored"),
)


def _copy_tree(dest: Path) -> None:
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache")
    for name in COPY:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=ignore)
        elif src.exists():
            shutil.copy2(src, dest / name)


def _pytest(tree: Path, args: tuple[str, ...], timeout: float) -> tuple[int | None, str]:
    env = {**os.environ, "PYTHONPATH": str(tree / "src"), "TRITON_INTERPRET": "1", "PYTHONDONTWRITEBYTECODE": "1"}
    # --full: a mutant must meet the tests marked `slow` too (the quick tier skips them)
    cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-o", "addopts=", "-p", "no:cacheprovider", "--full", *args]
    try:
        r = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, "timeout"
    lines = (r.stdout + r.stderr).strip().splitlines()
    return r.returncode, lines[-1] if lines else ""


def apply(tree: Path, m: Mutation) -> None:
    path = tree / m.file
    text = path.read_text()
    count = text.count(m.original)
    if count != 1:
        raise ValueError(f"{m.file}: the original snippet occurs {count} times (must be once): {m.original!r}")
    new = text.replace(m.original, m.replacement)
    compile(new, str(path), "exec")  # a mutation is a working program, not a syntax error
    path.write_text(new)


def run_one(i: int, m: Mutation, timeout: float) -> tuple[int, str, float, str]:
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix=f"mutant{i}-") as tmp:
        tree = Path(tmp)
        _copy_tree(tree)
        try:
            apply(tree, m)
        except (ValueError, SyntaxError) as exc:
            return i, "invalid", time.monotonic() - t0, str(exc)
        rc, last = _pytest(tree, m.tests, timeout)
    if rc is None:
        return i, "killed(timeout)", time.monotonic() - t0, last
    return i, ("survived" if rc == 0 else "killed"), time.monotonic() - t0, last


def _union(mutations: list[tuple[int, Mutation]]) -> list[tuple[str, ...]]:
    seen, out = set(), []
    for _, m in mutations:
        if m.tests not in seen:
            seen.add(m.tests)
            out.append(m.tests)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", type=int, nargs="*", help="mutation numbers to run (default: all)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per test run")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--no-baseline", action="store_true", help="skip running the selections unmutated first")
    args = ap.parse_args(argv)
    chosen = [(i, m) for i, m in enumerate(MUTATIONS, 1) if not args.only or i in args.only]
    if args.list:
        for i, m in chosen:
            print(f"{i:3d} {m.area:9s} {m.file}: {m.why}  [{' '.join(m.tests)}]")
        return 0
    t0 = time.monotonic()
    if not args.no_baseline:
        with tempfile.TemporaryDirectory(prefix="mutant-baseline-") as tmp:
            tree = Path(tmp)
            _copy_tree(tree)
            for m in MUTATIONS:  # every snippet is present once in the unmutated tree
                text = (tree / m.file).read_text()
                if text.count(m.original) != 1:
                    print(f"baseline: {m.file}: snippet occurs {text.count(m.original)} times: {m.original!r}")
                    return 2
            for sel in _union(chosen):
                rc, last = _pytest(tree, sel, args.timeout)
                if rc != 0:
                    print(f"baseline fails (rc {rc}) on {' '.join(sel)}: {last}")
                    return 2
        print(f"baseline: {len(_union(chosen))} selections pass unmutated ({time.monotonic() - t0:.0f} s)", flush=True)
    results = []
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for i, status, secs, last in pool.map(lambda im: run_one(im[0], im[1], args.timeout), chosen):
            m = MUTATIONS[i - 1]
            results.append(status)
            print(f"{i:3d} {status:16s} {secs:6.1f}s {m.area:9s} {m.file}: {m.why}  [{last}]", flush=True)
    killed = sum(s.startswith("killed") for s in results)
    print(f"{killed} of {len(results)} mutations killed, {len(results) - killed} survived or invalid "
          f"({time.monotonic() - t0:.0f} s)")
    return 0 if killed == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
