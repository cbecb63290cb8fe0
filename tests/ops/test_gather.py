"""The gather family (ops/gather): every public op against torch at sizes no block divides, every dtype;
out-of-range index values refused on the host before any launch; the verifier accepts the variants;
the launch contracts are proved for all shapes under the declared index range."""
import pytest
import torch
import torch.nn.functional as F

import warpsmith.ops as W
from warpsmith.errors import InvalidInputError
from warpsmith.ops import get_op, get_variant
from warpsmith.targets import get_target
from warpsmith.verify import verify_candidate

H100 = get_target("h100")
DTYPES = [torch.float32, torch.float16, torch.bfloat16]


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


@pytest.mark.parametrize("dtype", DTYPES)
def test_row_gathers_match_torch(dtype):
    w = torch.randn(13, 37).to(dtype)  # 37 columns: no power-of-two block divides them
    i = torch.randint(0, 13, (3, 5))
    assert torch.equal(W.embedding(w, i), F.embedding(i, w))
    x = torch.randn(4, 7, 131).to(dtype)
    sel = torch.tensor([6, 0, 2, 2, 5])
    for dim in (0, 1, 2, -1):
        idx = sel % x.shape[dim]
        assert torch.equal(W.index_select(x, dim, idx), x.index_select(dim, idx)), dim


@pytest.mark.parametrize("dtype", DTYPES)
def test_element_gather_matches_torch(dtype):
    x = torch.randn(5, 7, 3).to(dtype)
    for dim, shape in ((1, (5, 9, 3)), (2, (4, 7, 2)), (0, (3, 6, 3))):
        idx = torch.randint(0, x.shape[dim], shape)
        assert torch.equal(W.gather(x, dim, idx), torch.gather(x, dim, idx)), dim
    logits = torch.randn(129, 1001).to(dtype)  # the cross-entropy pick: one element per row
    t = torch.randint(0, 1001, (129, 1))
    assert torch.equal(W.gather(logits, 1, t), logits.gather(1, t))


@pytest.mark.parametrize("dtype", DTYPES)
def test_scatters_match_torch(dtype):
    x = torch.randn(4, 7, 3).to(dtype)
    s = torch.randn(4, 9, 3).to(dtype)
    idx = torch.randint(0, 7, (9,))  # duplicates: the adds of one element meet in the accumulator
    tol = {} if dtype == torch.float32 else {"rtol": 1e-2, "atol": 1e-2}
    torch.testing.assert_close(W.index_add(x, 1, idx, s), x.float().index_add(1, idx, s.float()).to(dtype), **tol)
    ixs = torch.randint(0, 7, (4, 9, 3))
    torch.testing.assert_close(W.scatter_add(x, 1, ixs, s), x.float().scatter_add(1, ixs, s.float()).to(dtype), **tol)
    distinct = torch.rand(4, 7, 3).argsort(1)[:, :5]
    s5 = torch.randn(4, 5, 3).to(dtype)
    assert torch.equal(W.scatter(x, 1, distinct, s5), x.scatter(1, distinct, s5))


@pytest.mark.parametrize("dtype", DTYPES)
def test_embedding_backward_matches_torch_and_skips_the_padding_row(dtype):
    i = torch.randint(0, 13, (3, 5))
    i[0, 0] = 2
    g = torch.randn(3, 5, 37).to(dtype)
    want = torch.ops.aten.embedding_dense_backward(g.float(), i, 13, 2, False).to(dtype)
    got = W.embedding_backward(g, i, 13, padding_idx=2)
    assert torch.equal(got[2], torch.zeros_like(got[2]))
    torch.testing.assert_close(got, want, **({} if dtype == torch.float32 else {"rtol": 1e-2, "atol": 1e-2}))


@pytest.mark.parametrize("call", [
    lambda: W.embedding(torch.randn(5, 3), torch.tensor([1, 5])),
    lambda: W.index_select(torch.randn(4, 5), 1, torch.tensor([0, -1])),
    lambda: W.gather(torch.randn(4, 5), 1, torch.tensor([[0], [7], [1], [2]])),
    lambda: W.index_add(torch.randn(5, 3), 0, torch.tensor([5]), torch.randn(1, 3)),
    lambda: W.embedding_backward(torch.randn(2, 3), torch.tensor([0, 9]), 5, padding_idx=1),
], ids=["embedding", "index_select", "gather", "index_add", "embedding_backward"])
def test_out_of_range_index_is_refused_before_any_launch(call, monkeypatch):
    from warpsmith.ops.gather import kernel as K

    launched = []
    monkeypatch.setattr(K, "gather_kernel", _Recorder(launched))
    monkeypatch.setattr(K, "scatter_kernel", _Recorder(launched))
    with pytest.raises(InvalidInputError, match=r"values of index: expected indices in \[0, \d+\)") as e:
        call()
    assert e.value.given in (5, -1, 7, 9) and not launched


def test_index_check_message_names_tensor_value_and_range():
    with pytest.raises(InvalidInputError) as e:
        W.embedding(torch.randn(11, 4), torch.tensor([3, 11, 2]))
    assert str(e.value) == "values of index: expected indices in [0, 11), got 11"


def test_padding_index_is_allowed_by_the_scatter_check_only_where_skipped():
    i = torch.tensor([0, 3])
    W.embedding_backward(torch.randn(2, 4), i, 4, padding_idx=3)  # in range: fine either way
    from warpsmith.ops.gather.variant import check_index

    check_index(torch.tensor([0, -1]), 4, "index", skip=-1)  # skip is the one value allowed outside
    with pytest.raises(InvalidInputError):
        check_index(torch.tensor([0, -2]), 4, "index", skip=-1)


def test_check_indices_false_skips_the_host_check(monkeypatch):
    from warpsmith.ops.gather import variant

    calls = []
    monkeypatch.setattr(variant, "check_index", lambda *a, **k: calls.append(a))
    from warpsmith.ops.gather import op

    monkeypatch.setattr(op, "check_index", lambda *a, **k: calls.append(a))
    W.embedding(torch.randn(5, 3), torch.tensor([1, 4]), check_indices=False)
    assert calls == []


class _Recorder:
    def __init__(self, log):
        self.log = log

    def __getitem__(self, grid):
        return lambda *a, **k: self.log.append(grid)


@pytest.mark.parametrize("op, index, dtype", [("gather", "rows", "bfloat16"), ("gather", "elements", "float32"),
                                               ("scatter_add", "rows", "float16"),
                                               ("scatter_add", "elements", "float32"),
                                               ("scatter", "elements", "float16")])
def test_verifier_accepts_the_tiled_variant(op, index, dtype):
    spec = get_op(op)
    p = spec.problem({"A": 3, "J": 5, "B": 37, "V": 7}, dtype, {"index": index})
    v = get_variant(op, "tiled")
    cert = verify_candidate(spec, p, v, v.default_config(p, H100), H100)
    assert cert.passed, {c.name: c.status for c in cert.checks}


def test_launch_contracts_are_proved_for_all_shapes():
    from warpsmith.ops.gather.contract import CONTRACTS, for_config
    from warpsmith.verify.symbolic import prove

    assert len(for_config(get_variant("scatter_add", "tiled"), {"BLOCK_J": 4, "BLOCK_B": 64, "num_warps": 1})) == 1
    seen = set()
    for c in CONTRACTS:
        for r in prove(c):
            for o in r.obligations:
                assert o.status == "proved", (c.name, o.to_json())
                seen.add(o.name)
    assert {"in_bounds", "int32_no_overflow", "race_free", "coverage"} <= seen


def test_the_index_range_is_what_proves_the_table_access():
    """Without the declared range the gather through the index is not proved: the prover names the
    escaping index value (the precondition the host check establishes is needed)."""
    from dataclasses import replace

    from warpsmith.ops.gather import contract as C
    from warpsmith.verify.symbolic import Tensor, prove

    c = C.gather([{"BLOCK_J": 4, "BLOCK_B": 64}])
    args = dict(c.args)
    args["idx_ptr"] = Tensor(args["idx_ptr"].shape, args["idx_ptr"].strides)
    statuses = [o.status for r in prove(replace(c, args=args)) for o in r.obligations
                if o.name == "in_bounds" and "src_ptr" in o.subject]
    assert statuses and all(s.startswith("failed") for s in statuses), statuses
