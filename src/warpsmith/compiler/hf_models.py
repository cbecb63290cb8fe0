"""Hugging Face models end to end through ``torch.compile(model, backend="warpsmith")``.

``python -m warpsmith.compiler.hf_models [--models llama,gpt2] [--layers 2] [--json OUT]`` builds small,
randomly initialized models from ``transformers`` configs (nothing is downloaded: Llama, Qwen2,
Mistral, GPT-2, ViT), and for each:

- runs one **training step** (forward with labels, ``loss.backward()``) compiled by the warpsmith
  backend, and compares the loss and every parameter's gradient with the eager model's. The
  criterion is the one the backend verifies each graph with
  (:func:`warpsmith.core.error_contract.within_reference`): against the model run in float64, the
  compiled step's largest error is at most 4x the eager float32 step's own, plus two ulps;
- for the causal LMs, runs ``generate()`` (greedy, KV cache) with the compiled forward and compares the
  tokens with eager greedy decoding (they must be equal);
- prints, per model, how much of the training step runs in warpsmith kernels (generated or library):
  coverage by FLOPs and by bytes (:mod:`.coverage`'s work model, summed over the step's graphs; a
  graph that runs eagerly counts as all ATen), the ATen fallbacks by op, and how many graphs were
  compiled.

Everything runs on CPU under Triton's interpreter when there is no GPU (slow: keep the configs tiny).
"""
from __future__ import annotations

import argparse
import copy
import json
import os
import sys
import time
import warnings
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

import torch

FAMILIES = ("llama", "qwen2", "mistral", "gpt2", "vit")
CAUSAL = ("llama", "qwen2", "mistral", "gpt2")


def build(name: str, layers: int = 2, hidden: int = 32, vocab: int = 128, seed: int = 0) -> torch.nn.Module:
    """A small randomly initialized model of family ``name`` (float32, eval mode: no dropout)."""
    import transformers as tf

    heads = 4
    common = dict(vocab_size=vocab, hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=layers,
                  num_attention_heads=heads, max_position_embeddings=64)
    if name == "llama":
        cfg, cls = tf.LlamaConfig(**common, num_key_value_heads=2), tf.LlamaForCausalLM
    elif name == "qwen2":
        cfg, cls = tf.Qwen2Config(**common, num_key_value_heads=2), tf.Qwen2ForCausalLM
    elif name == "mistral":
        cfg, cls = tf.MistralConfig(**common, num_key_value_heads=2, sliding_window=None), tf.MistralForCausalLM
    elif name == "gpt2":
        cfg = tf.GPT2Config(vocab_size=vocab, n_embd=hidden, n_layer=layers, n_head=heads, n_positions=64,
                            bos_token_id=0, eos_token_id=0)
        cls = tf.GPT2LMHeadModel
    elif name == "vit":
        cfg = tf.ViTConfig(hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
                           intermediate_size=2 * hidden, image_size=16, patch_size=8, num_channels=3, num_labels=5)
        cls = tf.ViTForImageClassification
    else:
        raise ValueError(f"unknown family {name!r}; known: {', '.join(FAMILIES)}")
    cfg._attn_implementation = "sdpa"
    torch.manual_seed(seed)
    return cls(cfg).eval()


def batch(name: str, model: torch.nn.Module, batch_size: int = 2, seq: int = 8, seed: int = 1) -> dict[str, Any]:
    """One training batch for ``model``: token ids with labels (causal LMs), pixels with class labels (ViT)."""
    gen = torch.Generator().manual_seed(seed)
    if name == "vit":
        c = model.config
        return {"pixel_values": torch.randn(batch_size, c.num_channels, c.image_size, c.image_size, generator=gen),
                "labels": torch.randint(0, c.num_labels, (batch_size,), generator=gen)}
    ids = torch.randint(0, model.config.vocab_size, (batch_size, seq), generator=gen)
    return {"input_ids": ids, "labels": ids.clone()}


@dataclass
class Check:
    """One compared value: the compiled step's error against float64, eager float32's, and the allowance."""

    name: str
    err: float
    eager_err: float
    allowed: float
    ok: bool


@dataclass
class Result:
    """What :func:`run_model` found for one model."""

    model: str
    params: int
    train_ok: bool = False
    checks: list[Check] = field(default_factory=list)
    graphs: list[str] = field(default_factory=list)  # one summary line per graph (training step)
    graphs_compiled: str = ""  # "compiled/total" over the training step's graphs
    flops: float = 0.0  # warpsmith's share of the step's FLOPs (coverage model)
    bytes: float = 0.0  # warpsmith's share of the step's bytes
    fallbacks: dict[str, dict[str, float]] = field(default_factory=dict)  # op -> count, bytes, flops
    unmeasured: list[str] = field(default_factory=list)  # eager graphs whose work is unknown (not emitted)
    generate_equal: bool | None = None  # None: not a generating model (ViT) or not asked
    generate_tokens: list[list[int]] = field(default_factory=list)
    generate_graphs: str = ""
    seconds: float = 0.0


def _grads(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}


def _step(model: torch.nn.Module, inputs: dict[str, Any],
          call: Callable[..., Any] | None = None) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Forward with labels and backward: (the loss, every parameter's gradient by name); ``call`` is
    the compiled model (its parameters are ``model``'s)."""
    model.zero_grad(set_to_none=True)
    out = (model if call is None else call)(**inputs)
    out.loss.backward()
    return out.loss.detach().clone(), _grads(model)


def _compare(name: str, got: torch.Tensor, eager: torch.Tensor, oracle: torch.Tensor) -> Check:
    from ..core.error_contract import within_reference

    o = oracle.double()
    err = float((got.double() - o).abs().max()) if o.numel() else 0.0
    eager_err = float((eager.double() - o).abs().max()) if o.numel() else 0.0
    largest = float(o.abs().max()) if o.numel() else 0.0
    ok, allowed = within_reference(err, eager_err, largest, 2.0 ** -24)
    return Check(name, err, eager_err, allowed, ok)


def coverage_of(reports: list[Any]) -> tuple[float, float, dict[str, dict[str, float]], list[str]]:
    """Warpsmith's shares of FLOPs and bytes over the graphs of ``reports`` (a graph that runs eagerly
    counts as all ATen), the fallbacks by op (count, bytes, flops) and the eager graphs with no
    coverage (never emitted: their work is unknown and not in the totals)."""
    mine_f = mine_b = tot_f = tot_b = 0.0
    fallbacks: dict[str, dict[str, float]] = {}
    unmeasured = []
    for r in reports:
        cov = r.coverage
        if not cov:
            unmeasured.append(f"{r.kind}: {r.reason}")
            continue
        tot_f, tot_b = tot_f + cov["flops_total"], tot_b + cov["bytes_total"]
        if r.status == "compiled":
            mine_f += cov["fraction_flops"] * cov["flops_total"]
            mine_b += cov["fraction_bytes"] * cov["bytes_total"]
            for fb in cov["fallbacks"]:
                op = fb["op"].replace("aten.", "")
                row = fallbacks.setdefault(op, {"count": 0, "bytes": 0.0, "flops": 0.0})
                row["count"] += 1
                row["bytes"] += fb["bytes"]
                row["flops"] += fb["flops"]
        else:
            row = fallbacks.setdefault(f"(whole {r.kind} graph, eager)", {"count": 0, "bytes": 0.0, "flops": 0.0})
            row["count"] += 1
            row["bytes"] += cov["bytes_total"]
            row["flops"] += cov["flops_total"]
    return (mine_f / tot_f if tot_f else 0.0, mine_b / tot_b if tot_b else 0.0,
            dict(sorted(fallbacks.items(), key=lambda kv: -kv[1]["bytes"])), unmeasured)


def train_step(name: str, layers: int = 2, hidden: int = 32) -> Result:
    """One training step compiled by the warpsmith backend vs eager (and float64): loss and gradients."""
    from .backend import Backend

    model = build(name, layers, hidden)
    inputs = batch(name, model)
    res = Result(name, sum(p.numel() for p in model.parameters()))
    eager_loss, eager_grads = _step(copy.deepcopy(model), inputs)
    oracle_loss, oracle_grads = _step(copy.deepcopy(model).double(), {k: v.double() if v.is_floating_point() else v
                                                                      for k, v in inputs.items()})
    be = Backend()
    compiled = torch.compile(model, backend=be, dynamic=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loss, grads = _step(model, inputs, compiled)
    res.checks.append(_compare("loss", loss, eager_loss, oracle_loss))
    missing = set(eager_grads) ^ set(grads)
    for k in eager_grads:
        if k in grads:
            res.checks.append(_compare(k, grads[k], eager_grads[k], oracle_grads[k]))
    res.train_ok = not missing and all(c.ok for c in res.checks)
    res.graphs = [r.summary() for r in be.reports]
    res.graphs_compiled = f"{sum(r.status == 'compiled' for r in be.reports)}/{len(be.reports)}"
    res.flops, res.bytes, res.fallbacks, res.unmeasured = coverage_of(be.reports)
    return res


def generate_equal(name: str, layers: int = 2, hidden: int = 32, new_tokens: int = 4) -> tuple[bool, list[list[int]], str]:
    """Greedy ``generate()`` (KV cache) with the forward compiled by the warpsmith backend vs eager:
    (tokens equal, the compiled run's tokens, compiled/total graphs)."""
    from .backend import Backend

    model = build(name, layers, hidden)
    ids = batch(name, model)["input_ids"][:1, :6]
    kw = dict(max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False, use_cache=True,
              pad_token_id=0)
    with torch.no_grad():
        want = model.generate(ids, **kw)
        be = Backend()
        model.forward = torch.compile(model.forward, backend=be, dynamic=False)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = model.generate(ids, **kw)
    compiled = f"{sum(r.status == 'compiled' for r in be.reports)}/{len(be.reports)}"
    return bool(torch.equal(got, want)), got.tolist(), compiled


def run_model(name: str, layers: int = 2, hidden: int = 32, generate: bool = True) -> Result:
    t = time.perf_counter()
    torch._dynamo.reset()
    res = train_step(name, layers, hidden)
    if generate and name in CAUSAL:
        torch._dynamo.reset()
        res.generate_equal, res.generate_tokens, res.generate_graphs = generate_equal(name, layers, hidden)
    res.seconds = time.perf_counter() - t
    return res


def table(results: list[Result]) -> str:
    """The markdown coverage table (one row per model)."""
    rows = ["| model | params | train step vs eager | graphs compiled | FLOPs in warpsmith | bytes in warpsmith "
            "| ATen fallbacks (by bytes) | generate() tokens |",
            "|---|---|---|---|---|---|---|---|"]
    for r in results:
        fb = ", ".join(f"{op}" + (f" x{int(v['count'])}" if v["count"] > 1 else "") for op, v in r.fallbacks.items())
        gen = "n/a" if r.generate_equal is None else ("equal" if r.generate_equal else "DIFFERENT") + \
            (f" ({r.generate_graphs} graphs compiled)" if r.generate_graphs else "")
        worst = max(r.checks, key=lambda c: c.err / c.allowed if c.allowed else 0.0, default=None)
        train = ("ok" if r.train_ok else "FAILED") + (f" (worst {worst.name}: {worst.err:.1e} <= {worst.allowed:.1e})"
                                                      if worst and r.train_ok else f" ({worst.name})" if worst else "")
        rows.append(f"| {r.model} | {r.params} | {train} | {r.graphs_compiled} | {r.flops:.1%} | {r.bytes:.1%} "
                    f"| {fb or 'none'} | {gen} |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m warpsmith.compiler.hf_models", description=__doc__.split("\n")[0])
    ap.add_argument("--models", default=",".join(FAMILIES), help="comma-separated families (default: all)")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=32)
    ap.add_argument("--no-generate", action="store_true", help="skip the generate() comparison")
    ap.add_argument("--json", help="write the results as JSON")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every graph's summary and check")
    a = ap.parse_args(argv)
    if not torch.cuda.is_available():
        os.environ.setdefault("TRITON_INTERPRET", "1")
    results = []
    for name in [m.strip() for m in a.models.split(",") if m.strip()]:
        r = run_model(name, a.layers, a.hidden, not a.no_generate)
        results.append(r)
        print(f"{name}: train step {'ok' if r.train_ok else 'FAILED'}, graphs compiled {r.graphs_compiled}, "
              f"{r.flops:.1%} of FLOPs and {r.bytes:.1%} of bytes in warpsmith kernels"
              + ("" if r.generate_equal is None else f", generate() tokens {'equal' if r.generate_equal else 'DIFFERENT'}")
              + f" ({r.seconds:.0f} s)", flush=True)
        for op, v in r.fallbacks.items():
            print(f"  fallback {op}: x{int(v['count'])}, {v['bytes']:.0f} bytes, {v['flops']:.0f} FLOPs")
        for u in r.unmeasured:
            print(f"  not measured (eager, never emitted): {u}")
        if a.verbose or not r.train_ok:
            for g in r.graphs:
                print(f"  graph {g}")
            for c in r.checks:
                if a.verbose or not c.ok:
                    print(f"  {'ok' if c.ok else 'FAILED'} {c.name}: error {c.err:.3g} vs float64, eager {c.eager_err:.3g}, "
                          f"allowed {c.allowed:.3g}")
    print()
    print(table(results))
    if a.json:
        with open(a.json, "w") as f:
            json.dump([asdict(r) for r in results], f, indent=1)
    return 0 if all(r.train_ok and r.generate_equal is not False for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
