#!/usr/bin/env python3
"""Decode attention (contiguous and paged KV caches) and MLA decode: GB/s against a copy and torch SDPA, in one run.

Cases (one query token per sequence, every sequence at the full length S, bf16 by default):

- ``decode``: Llama-3-8B-like GQA (Hk = 8, G = 4, D = 128), contiguous (B, Hk, S, D) caches;
- ``paged``: the same heads through a vLLM block table (NHD, page 16) and FlashInfer CSR page lists
  (HND, page 64), pages scattered over the pool;
- ``mla``: DeepSeek-V3 absorbed MLA (Dc = 512, Dr = 64; 128 and 16 query heads; page 64).

Each case is timed with CUDA events (warm-up, L2 flush, median: warpsmith.measure.timing) for:
``warpsmith`` (``warpsmith.ops.attention_decode`` / ``mla_decode``: dispatch to the run's tuning DB,
else the heuristic default), ``warpsmith_best`` (the fastest of a small measured sweep of the split
count and BLOCK_N, launched through the variant directly; which config won is reported), and
``sdpa`` (``torch.nn.functional.scaled_dot_product_attention`` on the dense equivalent — the paged
cases are compared with SDPA on contiguous caches of the same size, which is the bandwidth an
unpaged kernel gets; MLA as a 1-KV-head GQA with q . k over 576 dims and v the 512-dim latent).
GB/s counts the bytes a perfect kernel moves: the KV cache read once (MLA: the latent and rotary
parts once, the latent serving as K and V), q read, the output written. It is reported as a
fraction of a device-to-device copy of 1 GiB timed in the same run (at the start and the end; the
higher is used). Each implementation's output is checked against an fp32 SDPA reference (relative
L2 error); a wrong warpsmith result is INCORRECT.

Target (shared/TARGETS.md): decode, paged and MLA decode >= 85% of the measured copy bandwidth —
reported MET / NOT MET on the warpsmith_best column, never asserted.

``--dry-run`` runs tiny cases under the interpreter (CPU: correctness only, against the spec's
reference), then compiles, statically, every problem the real run would launch (the sweep launches
the same problems with other configs of the space) for the device's GPU (``--static-target``,
default h200: sm_90) with Triton's real compiler behind a stub driver (``warpsmith.gpucheck``): each
variant at its default config and ``--static-sample`` configs of its space; nothing runs. A failure
makes the dry run exit 1.

Usage::

    python benchmarks/attention_decode.py --dry-run --out /tmp/dec_dry   # CPU: tiny cases + static compile
    python benchmarks/attention_decode.py --out out                      # GPU: about 2-3 minutes
"""
from __future__ import annotations

import argparse
import datetime as _dt
import math
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_common import STATIC_TARGET, cuda_broken, say, static_compile, write_json  # noqa: E402

import torch  # noqa: E402

COPY_BYTES = 1 << 30
TARGET_FRACTION = 0.85


@dataclass(frozen=True)
class Case:
    kind: str  # decode | paged | mla
    name: str
    shape: dict[str, int]
    attrs: dict[str, Any] = field(default_factory=dict)

    @property
    def op(self) -> str:
        return "attention_decode_mla" if self.kind == "mla" else "attention_decode"


def suite(tiny: bool) -> list[Case]:
    if tiny:
        return [Case("decode", "tiny-gqa", {"B": 3, "Hk": 2, "G": 2, "S": 40, "D": 32}, {"cache": "contiguous"}),
                Case("paged", "tiny-bt", {"B": 3, "Hk": 2, "G": 2, "S": 40, "D": 32}, {"cache": "paged", "page_size": 8}),
                Case("paged", "tiny-csr", {"B": 2, "Hk": 1, "G": 4, "S": 33, "D": 32},
                     {"cache": "paged", "layout": "HND", "table": "csr", "page_size": 4}),
                Case("mla", "tiny-mla", {"B": 2, "H": 16, "S": 24, "Dc": 64, "Dr": 16}, {"page_size": 4})]
    out = []
    for b, s in ((1, 32768), (16, 8192), (64, 2048), (128, 1024)):
        shape = {"B": b, "Hk": 8, "G": 4, "S": s, "D": 128}
        out.append(Case("decode", f"llama3-8b B={b} S={s}", shape, {"cache": "contiguous"}))
        out.append(Case("paged", f"llama3-8b B={b} S={s} bt/NHD/p16", shape, {"cache": "paged", "page_size": 16}))
        out.append(Case("paged", f"llama3-8b B={b} S={s} csr/HND/p64", shape,
                        {"cache": "paged", "layout": "HND", "table": "csr", "page_size": 64}))
    for b, h, s in ((4, 128, 8192), (64, 128, 2048), (32, 16, 4096), (128, 16, 1024)):
        out.append(Case("mla", f"deepseek-v3 B={b} H={h} S={s}", {"B": b, "H": h, "S": s, "Dc": 512, "Dr": 64},
                        {"page_size": 64}))
    return out


# ----------------------------------------------------------------------------------- calls
def problem_of(case: Case, dtype: torch.dtype):
    from warpsmith.ops import get_op

    return get_op(case.op).problem(case.shape, dtype, case.attrs)


def inputs_of(case: Case, dtype: torch.dtype, device: str, seed: int) -> dict[str, torch.Tensor]:
    """Every sequence at full length S (the spec's generator, pages scattered over the pool)."""
    from warpsmith.ops import get_op

    spec = get_op(case.op)
    p = problem_of(case, dtype)
    return spec.inputs_for_lens(p, [p.shape["S"]] * p.shape["B"], torch.Generator().manual_seed(seed), "normal", device)


def warpsmith_call(case: Case, x: dict[str, torch.Tensor]) -> Callable[[], torch.Tensor]:
    import warpsmith.ops as wops

    tables = {k: x[k] for k in ("block_table", "kv_indptr", "kv_indices", "kv_last_page_len") if k in x}
    if case.kind == "mla":
        return lambda: wops.mla_decode(x["q_nope"], x["q_pe"], x["ckv_cache"], x["kpe_cache"], x.get("seq_lens"), **tables)
    layout = case.attrs.get("layout", "NHD")
    return lambda: wops.attention_decode(x["q"], x["k_cache"], x["v_cache"], x.get("seq_lens"), layout=layout, **tables)


def variant_call(case: Case, x: dict[str, torch.Tensor], config: dict[str, Any], dtype: torch.dtype) -> Callable[[], Any]:
    from warpsmith.ops import get_variant

    v, p = get_variant(case.op, "split_kv"), problem_of(case, dtype)
    return lambda: v.launch(x, p, config)[0]


def dense(case: Case, x: dict[str, torch.Tensor], dtype: torch.dtype) -> tuple[torch.Tensor, ...]:
    """(q, k, v) for SDPA: (B, Hq, 1, Dqk), (B, Hk, S, Dqk), (B, Hk, S, Dv), contiguous, full lengths."""
    from warpsmith.ops.attention.decode.spec import gather_dense

    p = problem_of(case, dtype)
    B, S = p.shape["B"], p.shape["S"]
    if case.kind == "mla":
        ckv = gather_dense(x["ckv_cache"], x, p.attrs, B, S, heads=False)
        kpe = gather_dense(x["kpe_cache"], x, p.attrs, B, S, heads=False)
        q = torch.cat([x["q_nope"], x["q_pe"]], dim=-1)[:, :, None]
        return q, torch.cat([ckv, kpe], dim=-1)[:, None].contiguous(), ckv[:, None].contiguous()
    k = gather_dense(x["k_cache"], x, p.attrs, B, S).contiguous()
    v = gather_dense(x["v_cache"], x, p.attrs, B, S).contiguous()
    return x["q"][:, :, None], k, v


def sdpa_call(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float) -> Callable[[], torch.Tensor]:
    import torch.nn.functional as F

    return lambda: F.scaled_dot_product_attention(q, k, v, scale=scale, enable_gqa=k.shape[1] != q.shape[1])[:, :, 0]


def min_bytes(case: Case, dtype: torch.dtype) -> float:
    from warpsmith.ops import get_op

    return get_op(case.op).min_bytes(problem_of(case, dtype))


def rel_err(a: torch.Tensor, r: torch.Tensor) -> float:
    a, r = a.double(), r.double()
    return float((a - r).norm() / max(r.norm(), 1e-30))


def sweep_configs(case: Case, dtype: torch.dtype, target: Any) -> list[dict[str, Any]]:
    """The default, and split counts / BLOCK_N around it that the variant accepts."""
    from warpsmith.ops import get_variant

    v, p = get_variant(case.op, "split_kv"), problem_of(case, dtype)
    d = v.default_config(p, target)
    out = [d]
    for splits in sorted({1, max(1, d["NUM_SPLITS"] // 2), d["NUM_SPLITS"] * 2, d["NUM_SPLITS"] * 4}):
        for bn in sorted({d["BLOCK_N"], 32 if d["BLOCK_N"] != 32 else 64}):
            c = {**d, "NUM_SPLITS": splits, "BLOCK_N": bn}
            if c not in out and v.rejection(p, c, target) is None:
                out.append(c)
    return out


# ----------------------------------------------------------------------------------- runs
def run_case(case: Case, args: argparse.Namespace, timer: Callable | None, target: Any) -> dict[str, Any]:
    dtype = args.torch_dtype
    device = "cuda" if timer else "cpu"
    row: dict[str, Any] = {"kind": case.kind, "name": case.name, "shape": case.shape, "attrs": case.attrs,
                           "dtype": args.dtype, "bytes": min_bytes(case, dtype), "impls": {}}
    t0 = time.perf_counter()
    x = inputs_of(case, dtype, device, args.seed)
    q, k, v = dense(case, x, dtype)
    scale = q.shape[-1] ** -0.5
    ref = sdpa_call(q.float(), k.float(), v.float(), scale)() if device == "cuda" else None
    if ref is None:
        from warpsmith.ops import get_op

        ref = get_op(case.op).reference(x, {**problem_of(case, dtype).attrs, "scale": scale})[0]
    calls = {"warpsmith": warpsmith_call(case, x)}
    if timer:
        calls["sdpa"] = sdpa_call(q, k, v, scale)
    for impl, fn in calls.items():
        try:
            out = fn()
            err = rel_err(out, ref)
            tol = {torch.float32: 1e-4, torch.float16: 5e-3, torch.bfloat16: 3e-2}[dtype]
            res: dict[str, Any] = {"rel_err": err, "correct": err <= tol}
            if timer:
                res["ms"] = timer(fn)
                res["gbps"] = row["bytes"] / res["ms"] / 1e6
            row["impls"][impl] = res
        except Exception as exc:  # a baseline that cannot run this case is reported, not fatal
            row["impls"][impl] = {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"}
    if timer and args.sweep:
        best = None
        for c in sweep_configs(case, dtype, target):
            try:
                ms = timer(variant_call(case, x, c, dtype))
            except Exception as exc:
                row.setdefault("sweep_errors", []).append(f"{c}: {type(exc).__name__}: {str(exc)[:160]}")
                continue
            row.setdefault("sweep", []).append({"config": c, "ms": ms})
            if best is None or ms < best[1]:
                best = (c, ms)
        if best:
            out = variant_call(case, x, best[0], dtype)()
            row["impls"]["warpsmith_best"] = {"ms": best[1], "gbps": row["bytes"] / best[1] / 1e6, "config": best[0],
                                              "rel_err": rel_err(out, ref)}
    row["seconds"] = round(time.perf_counter() - t0, 2)
    return row


def derive(row: dict[str, Any], copy_gbps: float | None) -> None:
    for res in row["impls"].values():
        if copy_gbps and res.get("gbps"):
            res["of_copy"] = res["gbps"] / copy_gbps
    best = row["impls"].get("warpsmith_best") or row["impls"].get("warpsmith") or {}
    sd = row["impls"].get("sdpa", {})
    if best.get("ms") and sd.get("ms"):
        row["speedup_vs_sdpa"] = sd["ms"] / best["ms"]
    if best.get("of_copy") is not None:
        row["target_met"] = best["of_copy"] >= TARGET_FRACTION


def table(rows: list[dict[str, Any]], copy_gbps: float | None) -> str:
    lines = [f"copy bandwidth (same run): {copy_gbps:.0f} GB/s" if copy_gbps else "dry run: correctness only",
             f"{'case':42} {'ws GB/s':>8} {'best GB/s':>9} {'of copy':>7} {'SDPA GB/s':>9} {'x SDPA':>6} "
             f"{'err':>8} target"]
    for r in rows:
        ws, best, sd = (r["impls"].get(k, {}) for k in ("warpsmith", "warpsmith_best", "sdpa"))

        def f(x, w, fmt):
            return format(x, fmt).rjust(w) if isinstance(x, (int, float)) else "-".rjust(w)

        ok = "INCORRECT" if ws.get("correct") is False else ""
        met = {True: "MET", False: "NOT MET", None: ""}[r.get("target_met")]
        lines.append(f"{r['kind'] + ' ' + r['name']:42.42} {f(ws.get('gbps'), 8, '.0f')} {f(best.get('gbps'), 9, '.0f')} "
                     f"{f(best.get('of_copy'), 7, '.0%')} {f(sd.get('gbps'), 9, '.0f')} {f(r.get('speedup_vs_sdpa'), 6, '.2f')} "
                     f"{f(ws.get('rel_err'), 8, '.1e')} {met} {ok} {ws.get('error', '')}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16", "float32"])
    p.add_argument("--kinds", default="decode,paged,mla", help="comma-separated from decode,paged,mla")
    p.add_argument("--out", default=None, help="output folder (default benchmarks/results/<gpu>/)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--total-time", type=float, default=420.0, help="start no new case after this many seconds")
    p.add_argument("--no-sweep", dest="sweep", action="store_false", help="no measured sweep of split counts")
    p.add_argument("--dry-run", action="store_true", help="CPU: tiny cases for correctness, then the static compile")
    p.add_argument("--no-static", action="store_true", help="dry run without the static compile")
    p.add_argument("--static-sample", type=int, default=2)
    p.add_argument("--static-target", default=STATIC_TARGET)
    args = p.parse_args(argv)
    args.torch_dtype = getattr(torch, args.dtype)
    kinds = {k.strip() for k in args.kinds.split(",") if k.strip()}
    from warpsmith.targets import current_device, get_target

    gpu = not args.dry_run and torch.cuda.is_available()
    if not args.dry_run and not gpu:
        p.error("no GPU here: use --dry-run")
    target = current_device().target if gpu else get_target(args.static_target)
    out_dir = Path(args.out) if args.out else Path(__file__).resolve().parent / "results" / target.name
    out_dir.mkdir(parents=True, exist_ok=True)
    doc: dict[str, Any] = {"benchmark": "attention_decode", "date": _dt.datetime.now(_dt.timezone.utc).isoformat(),
                           "dtype": args.dtype, "dry_run": args.dry_run, "target": target.name,
                           "timing_kind": "measured" if gpu else "none", "rows": []}
    timer = None
    copy = []
    if gpu:
        from warpsmith.measure.timing import time_gpu

        def time_ms(fn):
            return time_gpu(lambda _: fn(), [None], warmup=3, runs=25, max_ms=300).median_ms

        timer = time_ms

        def copy_gbps() -> float:
            src = torch.empty(COPY_BYTES // 4, dtype=torch.int32, device="cuda").random_()
            dst = torch.empty_like(src)
            ms = time_ms(lambda: dst.copy_(src))
            del src, dst
            return 2.0 * COPY_BYTES / ms / 1e6

        copy.append(copy_gbps())
        doc["device"] = torch.cuda.get_device_name()
    t_start = time.perf_counter()
    cases = [c for c in suite(tiny=args.dry_run) if c.kind in kinds]
    for case in cases:
        if time.perf_counter() - t_start > args.total_time:
            doc.setdefault("skipped", []).append(case.name)
            continue
        try:
            row = run_case(case, args, timer, target)
        except Exception as exc:
            row = {"kind": case.kind, "name": case.name, "impls": {"warpsmith": {"error": f"{type(exc).__name__}: {exc}"}},
                   "traceback": traceback.format_exc()[-2000:]}
            broken = cuda_broken()
            if broken:
                doc["aborted"] = broken
                doc["rows"].append(row)
                break
        doc["rows"].append(row)
        say(f"{case.kind:6} {case.name:40} " + " ".join(
            f"{k}={v.get('gbps', 0):.0f}GB/s" if v.get("gbps") else f"{k}:{'ok' if v.get('correct') else v}"
            for k, v in row["impls"].items()))
    if gpu:
        copy.append(copy_gbps())
        doc["copy_gbps"] = max(copy)
    for r in doc["rows"]:
        derive(r, doc.get("copy_gbps"))
    wrong = [r["name"] for r in doc["rows"] if r["impls"].get("warpsmith", {}).get("correct") is not True]
    doc["incorrect"] = wrong
    rc = 1 if wrong else 0
    if args.dry_run and not args.no_static:
        problems = [{"op": c.op, "shape": c.shape, "dtype": args.dtype, "attrs": c.attrs}
                    for c in suite(tiny=False) if c.kind in kinds]
        doc["static_compile"] = static_compile(problems, args.static_target, args.static_sample,
                                               out_dir / "gpucheck_attention_decode.json")
        rc = rc or (0 if doc["static_compile"]["ok"] else 1)
    if gpu:
        met = [r.get("target_met") for r in doc["rows"] if r.get("target_met") is not None]
        doc["summary"] = {"cases": len(doc["rows"]), "target_met": sum(met), "target_of": len(met),
                          "geomean_vs_sdpa": math.exp(sum(math.log(r["speedup_vs_sdpa"]) for r in doc["rows"]
                                                          if r.get("speedup_vs_sdpa")) /
                                                      max(1, sum(1 for r in doc["rows"] if r.get("speedup_vs_sdpa"))))}
    text = table(doc["rows"], doc.get("copy_gbps"))
    say(text)
    name = "attention_decode_dry" if args.dry_run else "attention_decode"
    write_json(out_dir / f"{name}.json", doc)
    (out_dir / f"{name}.txt").write_text(text + "\n")
    return rc


if __name__ == "__main__":
    sys.exit(main())
