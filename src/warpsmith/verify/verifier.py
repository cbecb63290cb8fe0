"""Verification at the end (v1): the checks a finalist must pass before it is recorded.

1. its guards hold for the problem;
2. error contract: fresh inputs from several distributions against the fp64 oracle;
3. exact-arithmetic identity: small-integer inputs, bitwise equality demanded;
4. outputs (and scratch) poisoned before every run: unwritten elements are caught;
5. determinism: every output of every contract run is compared bitwise with a re-run on the same
   inputs, and the first inputs are run DETERMINISM_RUNS times (flakiness in a secondary output, or
   at some calls only, is caught), unless the variant declares otherwise;
6. odd shapes: 1, and one past each block size (a tail of one), fitted to the guards;
7. grid stride: a launcher that sizes a persistent grid for its target runs on the same target
   with one SM, so its programs stride over more blocks than there are programs (a path small
   test shapes on a 132-SM target never reach).
"""
from __future__ import annotations

from typing import Any, Callable, Mapping

import torch

from ..core.variant import Variant
from ..core.errors import InvalidInputError
from ..core.opspec import DISTRIBUTIONS, OpSpec, Problem, as_tuple
from ..targets import Target, versions
from .certificate import Certificate, Check
from .harness import HarnessFailure, run_guarded, takes_target, unwritten

DETERMINISM_RUNS = 3  # runs of the first inputs (every other contract input is re-run once)


def one_sm(target: Target) -> Target:
    """``target`` with a single SM: a persistent grid of PROGRAMS_PER_SM programs strides over the blocks."""
    from dataclasses import replace

    return replace(target, name=f"{target.name}-1sm", sms=1)


def _contract_run(spec: OpSpec, problem: Problem, variant: Variant, config: Mapping[str, Any],
                  inputs: Mapping[str, torch.Tensor], target: Target | None = None,
                  ) -> tuple[str | None, tuple[torch.Tensor, ...] | None]:
    """One guarded run, each output judged by its contract; returns (failure reason or None, the outputs)."""
    try:
        outs = run_guarded(spec, variant, problem, config, inputs, target)
    except HarnessFailure as exc:
        return str(exc), None
    verdict = spec.judge(problem, inputs, outs)
    if verdict is not NotImplemented:  # a criterion over the outputs together (discrete outputs)
        return verdict, outs
    ref64, scale = (as_tuple(x) for x in spec.oracle(inputs, problem.attrs))
    refs, contracts = as_tuple(spec.reference(inputs, problem.attrs)), as_tuple(spec.contract(problem))
    perturbed = as_tuple(spec.perturbed_oracle(inputs, problem.attrs, min(c.u_acc for c in contracts)))
    for i, out in enumerate(outs):
        where = f"output {i}: " if len(outs) > 1 else ""
        holes = unwritten(out, ref64[i])
        if holes:
            return f"{where}{holes} of {out.numel()} output elements left unwritten (poison survived)", outs
        ok, msg = contracts[i].check(out, ref64[i], scale[i], refs[i], perturbed[i])
        if not ok:
            return where + msg, outs
    return None, outs


def exact_on(spec: OpSpec, problem: Problem, inputs: Mapping[str, torch.Tensor]) -> bool:
    """Whether the op is exact on these inputs: its reference evaluated in fp32 equals the fp64 one.

    Then every intermediate of a kernel computing in at least fp32 is exact too, and its result,
    rounded once to the output dtype, must equal the oracle's rounding bit for bit.
    """
    as32 = {k: v.to(torch.float32) if v.is_floating_point() else v for k, v in inputs.items()}
    as64 = {k: v.to(torch.float64) if v.is_floating_point() else v for k, v in inputs.items()}
    return all(torch.equal(r32.to(torch.float64), r64) for r32, r64 in
               zip(as_tuple(spec.reference(as32, problem.attrs)), as_tuple(spec.reference(as64, problem.attrs))))


def _identity_test(spec: OpSpec, problem: Problem, variant: Variant, config: Mapping[str, Any],
                   gen: torch.Generator, device) -> tuple[str, str, str] | None:
    """Bitwise test on small-integer inputs, on the problem or its exact counterpart (None: neither is exact)."""
    counterpart = spec.identity_problem(problem)
    for ip in [problem] + ([counterpart] if counterpart != problem else []):
        ex = spec.exact_inputs(ip, gen, device)
        if ex is None or not exact_on(spec, ip, ex):
            continue
        try:
            outs = run_guarded(spec, variant, ip, config, ex)
        except HarnessFailure as exc:
            return "exact_identity", f"failed({exc})", ""
        for i, (out, exact) in enumerate(zip(outs, as_tuple(spec.oracle(ex, ip.attrs)[0]))):
            expect = exact.to(out.dtype).to(out.device)
            if not torch.equal(out, expect):
                bad = tuple((out != expect).nonzero()[0].tolist())
                which = f"output {i}, " if len(outs) > 1 else ""
                return "exact_identity", (f"failed({which}first mismatch at {bad}: got {out[bad].item()}, "
                                          f"exact {expect[bad].item()})"), ""
        note = "" if ip == problem else f" on the exact counterpart {ip.describe()}"
        return "exact_identity", "tested(1 trials)", "exactness detected (fp32 reference == fp64); bitwise equality" + note
    return None


def odd_problems(spec: OpSpec, problem: Problem, variant: Variant, config: Mapping[str, Any],
                 target: Target) -> list[Problem]:
    """Shapes of size 1 and one past each block (never a multiple of it), fitted to active guards; a
    shape the spec refuses with the problem's attributes (e.g. a conv whose padding leaves no output
    at size 1) is left out."""
    blocks = variant.axis_blocks(config)
    required = [a.name for a in spec.axes if not a.optional]
    shapes = [{a: 1 for a in required}, {a: blocks.get(a, 16) + 1 for a in required},
              {a: (13 if i % 2 == 0 else blocks.get(a, 16) + 1) for i, a in enumerate(required)}]
    out, seen = [], set()
    for shape in shapes:
        if "B" in problem.shape:
            shape["B"] = min(problem.shape["B"], 2)
        for g in variant.guards:
            if g.active(config):
                shape = g.fit(shape, config)
        try:
            p = spec.problem(shape, problem.dtype, problem.attrs)
        except InvalidInputError:
            continue
        key = tuple(sorted(p.shape.items()))
        if key not in seen and variant.rejection(p, config, target) is None:
            seen.add(key)
            out.append(p)
    return out


_RANK = {"failed": 3, "unknown": 2, "bounded": 1, "proved": 0}


def _prove_into(cert: Certificate, variant: Variant, problem: Problem, config: Mapping[str, Any]) -> bool:
    """Symbolic proofs of the config's exact kernels; each obligation kind gets its weakest status."""
    from .symbolic import OBLIGATIONS, prove

    contracts = variant.contracts(problem, config)
    if not contracts:
        cert.symbolic = {n: "unknown(no launch contract declared)" for n in OBLIGATIONS}
        return True
    worst: dict[str, str] = {}
    for c in contracts:
        for report in prove(c):
            cert.proofs.append(report.to_json())
            for o in report.obligations:
                status = o.status if o.status != "failed" else f"failed({o.subject}: {o.counterexample})"
                if o.status == "unknown":
                    status = f"unknown({o.detail[:120]})"
                prev = worst.get(o.name)
                if prev is None or _RANK[status.split("(")[0]] > _RANK[prev.split("(")[0]]:
                    worst[o.name] = status
    cert.symbolic = {n: worst.get(n, "unknown(no such obligation was produced)") for n in OBLIGATIONS}
    cert.symbolic.update({n: s for n, s in worst.items() if n not in cert.symbolic})  # trace, domain, loop_step
    if not any(c.split for c in contracts):
        cert.symbolic["split_coverage"] = "not applicable (no split reduction)"
    if "cross_program_raw" not in worst and "trace" not in worst:
        cert.symbolic["cross_program_raw"] = "not applicable (no tensor is both loaded and stored)"
    for name, status in cert.symbolic.items():
        cert.checks.append(Check(f"symbolic.{name}", status))
    return not any(s.startswith("failed") for s in cert.symbolic.values())


def verify_candidate(spec: OpSpec, problem: Problem, variant: Variant, config: Mapping[str, Any], target: Target,
                     *, device: str | torch.device = "cpu", seed: int = 0, trials: int = 1,
                     prove: bool = False, progress: Callable[[str], None] | None = None) -> Certificate:
    """Run every check on one config; the certificate says which passed (it stops at the first failure).

    With ``prove``, the symbolic obligations of the config's exact kernels are discharged first.
    ``progress`` is told each stage as it starts (a short phrase: ``proving the kernels
    symbolically``, ``testing ...``).
    """
    say = progress or (lambda _: None)
    gen = torch.Generator().manual_seed(seed + 0x5EED)
    cert = Certificate(
        op=spec.name, variant=variant.name,
        problem={"shape": dict(problem.shape), "dtype": problem.dtype_name, "attrs": dict(problem.attrs)},
        config=dict(config),
        guards=[{"knob": g.knob, "requires": g.text, "active": g.active(config)} for g in variant.guards],
        target=target.name, source_hash=variant.source_hash(), deterministic=variant.is_deterministic(config),
        versions=versions())

    def add(name: str, status: str, detail: str = "") -> bool:
        cert.checks.append(Check(name, status, detail))
        return not status.startswith("failed")

    if prove:
        say("proving the kernels symbolically (memory safety, races, coverage)")
        if not _prove_into(cert, variant, problem, config):
            return cert
    failed = variant.failed_guards(problem, config)
    if not add("guards_hold", f"failed({failed[0].knob} needs {failed[0].text})" if failed else "proved",
               "guard predicates evaluated exactly on this shape"):
        return cert

    say(f"testing: error contract on {len(DISTRIBUTIONS) * trials} input draw(s), determinism, odd shapes")
    runs, done = 0, []
    for dist in DISTRIBUTIONS:
        for _ in range(trials):
            inputs = spec.make_inputs(problem, gen, dist, device)
            why, out = _contract_run(spec, problem, variant, config, inputs)
            done.append((dist, inputs, out))  # re-run later for the determinism check
            runs += 1
            if why:
                add("error_contract", f"failed({dist} inputs: {why})")
                return cert
    add("error_contract", f"tested({runs} trials)", "distributions: " + ", ".join(DISTRIBUTIONS))
    add("poisoned_outputs", f"tested({runs} trials)", "outputs and scratch filled with NaN before each run")

    identity = _identity_test(spec, problem, variant, config, gen, device)
    if identity is not None and not add(*identity):
        return cert
    if identity is None:
        add("exact_identity", "skipped(not exact on small-integer inputs)",
            "the reference in fp32 differs from fp64 there (e.g. transcendental functions); the error contract covers it")

    reruns = [done[0]] * (DETERMINISM_RUNS - 1) + done[1:]
    differs = None
    for dist, inputs, out in reruns:
        try:
            again = run_guarded(spec, variant, problem, config, inputs)
        except HarnessFailure as exc:
            add("determinism", f"failed(a re-run on {dist} inputs: {exc})")
            return cert
        for i, (a, b) in enumerate(zip(out, again)):
            if differs is None and not _bitwise(a, b):
                where = f"output {i}" if len(out) > 1 else "the output"
                differs = f"two runs on the same inputs differ ({dist} inputs, {where})"
    if cert.deterministic and differs:
        add("determinism", f"failed({differs})")
        return cert
    add("determinism", f"tested({len(reruns) + 1} trials)" if cert.deterministic else
        "skipped(declared non-deterministic)",
        f"every output of {len(reruns)} re-runs bitwise equal to its first run" if not differs else
        f"runs differed (allowed: declared non-deterministic): {differs}")

    odd = odd_problems(spec, problem, variant, config, target)
    for p in odd:
        why, _ = _contract_run(spec, p, variant, config, spec.make_inputs(p, gen, "normal", device))
        if why:
            add("odd_shapes", f"failed({p.describe()}: {why})")
            return cert
    add("odd_shapes", f"tested({len(odd)} trials)", "; ".join(",".join(f"{k}={v}" for k, v in p.shape.items()) for p in odd))

    if not takes_target(variant):
        add("grid_stride", "skipped(the launcher does not size its grid for a target)")
        return cert
    tiny = one_sm(target)
    for p in [problem] + odd[-1:]:
        why, _ = _contract_run(spec, p, variant, config, spec.make_inputs(p, gen, "normal", device), tiny)
        if why:
            add("grid_stride", f"failed({tiny.name}, {p.describe()}: {why})")
            return cert
    add("grid_stride", f"tested({1 + len(odd[-1:])} trials)",
        f"launched for {tiny.name}: a persistent grid strides over more blocks than it has programs")
    return cert


def _bitwise(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Same values bit for bit (NaN in the same places counts as equal)."""
    if a.is_floating_point() and a.element_size() == 1:  # fp8: the bytes themselves (no nan_to_num for fp8)
        return torch.equal(a.view(torch.uint8), b.view(torch.uint8))
    if a.is_floating_point():
        return torch.equal(a.isnan(), b.isnan()) and torch.equal(a.nan_to_num(), b.nan_to_num())
    return torch.equal(a, b)
