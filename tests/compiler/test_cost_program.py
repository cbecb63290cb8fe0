"""The compiler's one cost model (warpsmith.cost.program) and the launch-config search of the
generated kernels: a register-heavy row kernel costs more than a copy of the same bytes, an invalid
config is never chosen, the chosen config is what the emitted file launches and what the report
says, the programs with searched configs still pass verification, and the report compares the
chosen program with the same program at default configs and with greedy fusion."""
import dataclasses
from pathlib import Path

import torch

from warpsmith.compiler import solve
from warpsmith.compiler.fuse import Group
from warpsmith.compiler.ir import Graph, Node
from warpsmith.cost import program as P
from warpsmith.targets import ConfigFacts, KernelFacts, get_target

PROBLEMS = Path(__file__).parent / "problems"
H100 = get_target("h100")


def _heavy_rows(M=8192, N=2048):
    """A row kernel with many values alive, three reductions and transcendentals: reads x, writes f."""
    x = Node("x", "input", "input", [], (M, N), torch.float32)
    a = Node("a", "pointwise", "exp", [x], (M, N), torch.float32)
    b = Node("b", "pointwise", "tanh", [a], (M, N), torch.float32)
    s1 = Node("s1", "reduction", "sum", [b], (M, 1), torch.float32, {"dims": (1,)})
    m1 = Node("m1", "reduction", "amax", [a], (M, 1), torch.float32, {"dims": (1,)})
    c = Node("c", "pointwise", "div", [b, s1], (M, N), torch.float32)
    d = Node("d", "pointwise", "sub", [c, m1], (M, N), torch.float32)
    e = Node("e", "pointwise", "mul", [d, a], (M, N), torch.float32)
    s2 = Node("s2", "reduction", "sum", [e], (M, 1), torch.float32, {"dims": (1,)})
    f = Node("f", "pointwise", "div", [e, s2], (M, N), torch.float32)
    nodes = [x, a, b, s1, m1, c, d, e, s2, f]
    return Graph(nodes, [f], [x], {}), Group("rows", (M, N), nodes[1:], (1,))


def _copy(M=8192, N=2048):
    x = Node("x", "input", "input", [], (M, N), torch.float32)
    y = Node("y", "pointwise", "neg", [x], (M, N), torch.float32)
    return Graph([x, y], [y], [x], {}), Group("pointwise", (M, N), [y])


def _moved(ks):
    return ks.full_read_bytes * ks.elements + ks.row_read_bytes + ks.write_bytes


def test_a_register_heavy_row_kernel_costs_more_than_a_copy_of_the_same_bytes():
    (gr, rows), (gc, copy) = _heavy_rows(), _copy()
    kr, kc = P.kernel_shape(gr, rows), P.kernel_shape(gc, copy)
    assert _moved(kr) == _moved(kc)  # bytes over bandwidth would price them the same
    tr, tc = P.tune_kernel(gr, rows, H100), P.tune_kernel(gc, copy, H100)
    assert tr.predicted_ms > tc.predicted_ms * 1.05
    assert P.config_ms(gr, rows, P.default_config(rows), H100) > P.config_ms(gc, copy, P.default_config(copy), H100)
    # and what makes it heavy counts: the same row kernel with fewer values alive costs less
    M, N = rows.domain
    x = Node("x", "input", "input", [], (M, N), torch.float32)
    a = Node("a", "pointwise", "exp", [x], (M, N), torch.float32)
    s = Node("s", "reduction", "sum", [a], (M, 1), torch.float32, {"dims": (1,)})
    f = Node("f", "pointwise", "div", [a, s], (M, N), torch.float32)
    lg, light = Graph([x, a, s, f], [f], [x], {}), Group("rows", (M, N), [a, s, f], (1,))
    kl = P.kernel_shape(lg, light)
    assert _moved(kl) == _moved(kr) and kl.live_full < kr.live_full
    assert P.tune_kernel(lg, light, H100).predicted_ms < tr.predicted_ms


def test_at_a_predicted_tie_the_default_or_the_fewest_programs_win():
    """A tiny launch-bound row sum (992 rows of 32): many configs are predicted within TIE_REL of the
    best. The choice launches the fewest programs among them (ROWS=1 would launch 992: no faster on
    the model, and 30x slower under Triton's CPU interpreter), and the default wins any tie it is in."""
    M, N = 992, 32
    x = Node("x", "input", "input", [], (M, N), torch.float32)
    s = Node("s", "reduction", "sum", [x], (M, 1), torch.float32, {"dims": (1,)})
    g, rows = Graph([x, s], [s], [x], {}), Group("rows", (M, N), [s], (1,))
    P._TUNED.clear()
    ks = P.kernel_shape(g, rows)
    timed = [(P.config_ms(g, rows, c, H100, shape=ks), c) for c in P.kernel_space(rows)
             if not P.kernel_rejection(rows, ks, c, H100, None)]
    best = min(t for t, _ in timed)
    ties = [c for t, c in timed if t <= best * (1 + P.TIE_REL)]
    assert len({P._programs(ks, c) for c in ties}) > 1  # a real choice among ties
    chosen = P.tune_kernel(g, rows, H100).config
    assert chosen in ties
    assert P._programs(ks, chosen) == min(P._programs(ks, c) for c in ties)
    # the default, when it ties, is kept
    default = P.default_config(rows)
    assert P._pick([(best, ties[0]), (best * (1 + P.TIE_REL / 2), default)], default, ks)[0] == default
    assert P._pick([(best, ties[0]), (best * (1 + 2 * P.TIE_REL), default)], default, ks)[0] == ties[0]


def test_a_config_the_target_or_the_compiler_refuses_is_never_chosen():
    g, rows = _heavy_rows()
    ks = P.kernel_shape(g, rows)
    space = P.kernel_space(rows)
    refused = [c for c in space if P.kernel_rejection(rows, ks, c, H100)]
    assert refused and any("spill" in P.kernel_rejection(rows, ks, c, H100) for c in refused)
    first = P.tune_kernel(g, rows, H100)
    assert first.config not in refused and first.rejected == len(refused)
    _, regs, allowed = P.kernel_work(rows, ks, first.config, H100)
    assert regs <= allowed
    # the compiler's word: the config chosen above spills; the search takes another, valid one
    spills = ConfigFacts((KernelFacts("k", first.config.num_warps, 1, 255, 64, 0, 0, 0),))
    second = P.tune_kernel(g, rows, H100, facts=lambda grp, c: spills if c == first.config else None)
    assert second.config != first.config and second.rejected == first.rejected + 1
    assert P.kernel_rejection(rows, ks, second.config, H100) is None
    # a target with a quarter of the registers refuses more and never picks a refused one
    small = dataclasses.replace(H100, name="h100-small-rf", regs_per_sm=16384)
    third = P.tune_kernel(g, rows, small)
    assert third.rejected > first.rejected
    assert P.kernel_rejection(rows, ks, third.config, small) is None or third.config == third.default


def test_the_searched_configs_are_emitted_reported_and_verified(tmp_path):
    res = solve(PROBLEMS / "long_softmax.py", tmp_path / "new.py")
    assert res.status == "accepted", res.verdict
    prog = res.program
    [k] = prog.kernels
    assert k.looped and k.choice is not None
    assert k.config == k.choice.config != k.choice.default  # the search moved off the default here
    assert k.choice.predicted_ms < k.choice.default_ms
    text = (tmp_path / "new.py").read_text()
    assert f"{k.config.meta(True)}, EMULATE=_EMULATE)" in text  # the launch runs the chosen config
    assert "launch config searched" in text
    rep = res.to_json()["search"]
    [kr] = rep["kernels"]
    assert kr["name"] == k.name and kr["config"] == k.config.to_json()
    assert kr["default_config"] == k.choice.default.to_json() and kr["default_ms"] > kr["predicted_ms"]
    # the comparison: the same program at default configs, and greedy fusion
    assert rep["untuned_ms"] > rep["chosen_ms"] and rep["gain_over_untuned"] > 1.0
    assert rep["greedy_untuned_ms"] >= rep["untuned_ms"] - 1e-12 and rep["greedy_ms"] >= rep["chosen_ms"] - 1e-12
    explain = res.explain()
    assert f"kernel {k.name}: " in explain and "untuned kernels (default configs)" in explain
    assert "predicted on h100" in explain


def test_library_calls_are_priced_by_their_family_model_and_reported(tmp_path):
    a = Node("a", "input", "input", [], (4096, 1024), torch.bfloat16)
    w = Node("w", "param", "param", [], (1024, 1024), torch.bfloat16)
    mm = Node("mm", "library", "matmul", [a, w, None], (4096, 1024), torch.bfloat16,
              {"form": "linear", "activation": "none"})
    p = P.library_problem(mm)
    assert (p.shape["M"], p.shape["N"], p.shape["K"]) == (4096, 1024, 1024) and p.attrs["layout"] == "nt"
    # the tile model at the launcher's config, not bytes over bandwidth: 8.6 GFLOP are compute-bound here,
    # and smaller tiles (less reuse) cost more on the same problem
    bytes_ms = (2 * 4096 * 1024 + 1024 * 1024) * 2 / (H100.hbm_tbps * 1e9)
    t = P.node_ms(mm, H100)
    assert t > 2 * bytes_ms
    assert P.library_ms(mm, H100, {**P.LIBRARY_CONFIGS["matmul"], "BLOCK_M": 16, "BLOCK_N": 16}) > t
    # in a solve's report: each library call with its config, where it comes from, and its time
    # (library tuning off: tests/compiler/test_library_tune.py covers a tuned config)
    res = solve(PROBLEMS / "linear_relu.py", tmp_path / "new.py", library_budget=0)
    assert res.status == "accepted", res.verdict
    [lib] = res.to_json()["search"]["library"]
    assert lib["op"] == "matmul" and lib["config"] == P.LIBRARY_CONFIGS["matmul"]
    assert lib["source"] == "default" and lib["detail"].startswith("launcher default") and lib["predicted_ms"] > 0
