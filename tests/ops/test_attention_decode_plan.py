"""The decode plan: every token of every sequence in exactly one work item, a grid fixed by the capacity
alone (CUDA-graph friendly), padding items empty; CSR lengths; and the proofs of the launch contracts."""
import pytest
import torch

from warpsmith.errors import InvalidInputError
from warpsmith.ops.attention.decode.plan import DecodePlan, plan_balanced, plan_static, seq_lens_from_csr


def covered(plan: DecodePlan, lens: list[int]) -> None:
    """Items of sequence b (its indptr range) tile [0, L_b) exactly once; items outside every range are empty."""
    wb, ws, we, ptr = (t.tolist() for t in (plan.work_batch, plan.work_start, plan.work_end, plan.batch_indptr))
    assert ptr[0] == 0 and all(a <= b for a, b in zip(ptr, ptr[1:])) and ptr[-1] <= plan.items
    owned = set()
    for b, n in enumerate(lens):
        hits = [0] * n
        for w in range(ptr[b], ptr[b + 1]):
            owned.add(w)
            assert wb[w] == b and 0 <= ws[w] and we[w] <= n
            for j in range(ws[w], we[w]):
                hits[j] += 1
        assert hits == [1] * n, (b, hits)
    for w in set(range(plan.items)) - owned:
        assert ws[w] == we[w] == 0 and 0 <= wb[w] < len(lens)  # padding: empty, and its batch index in range


@pytest.mark.parametrize("lens", [[1, 54, 97], [0, 0, 5], [128], [3, 0, 200, 17, 64]])
@pytest.mark.parametrize("splits, block_n", [(1, 16), (3, 16), (8, 32)])
def test_static_plan_covers_each_token_once_on_a_fixed_grid(lens, splits, block_n):
    plan = plan_static(torch.tensor(lens, dtype=torch.int32), splits, block_n)
    assert plan.items == len(lens) * splits and plan.direct == (splits == 1)
    covered(plan, lens)
    for w in range(plan.items):  # items start on a block boundary: no item straddles two programs' tiles
        assert int(plan.work_start[w]) % block_n == 0


@pytest.mark.parametrize("lens", [[1, 54, 97], [0, 0, 5], [1000, 1, 1, 1]])
def test_balanced_plan_covers_each_token_once_and_pads_to_capacity(lens):
    plan = plan_balanced(lens, block_n=16, max_items=4 * len(lens), target_items=2 * len(lens) + 1)
    assert plan.items == 4 * len(lens) and not plan.direct
    covered(plan, lens)
    live = int((plan.work_end > plan.work_start).sum())
    assert live <= 2 * len(lens) + 1
    if max(lens) >= 1000:  # the long sequence gets most of the items
        ptr = plan.batch_indptr.tolist()
        assert ptr[1] - ptr[0] > 1


def test_plans_refuse_bad_arguments():
    with pytest.raises(InvalidInputError):
        plan_static(torch.tensor([3]), 0, 16)
    with pytest.raises(InvalidInputError):
        plan_balanced([5, 5, 5], 16, max_items=2)
    with pytest.raises(InvalidInputError):
        plan_balanced([5, -1], 16, max_items=4)


def test_seq_lens_from_csr():
    indptr = torch.tensor([0, 2, 2, 5], dtype=torch.int32)
    last = torch.tensor([3, 0, 16], dtype=torch.int32)
    assert seq_lens_from_csr(indptr, last, 16).tolist() == [19, 0, 48]


# ---- symbolic proofs of the launch contracts ------------------------------------------------------------
def test_the_page_gathers_and_the_padded_grid_are_proved_in_bounds():
    """Every load and store of the paged kernels (block table NHD, CSR) and of the merge: in bounds and
    no int32 wrap, for all sizes, every program of the padded grid, page indices in [0, NB)."""
    from warpsmith.ops.attention.decode.contract import CONTRACTS
    from warpsmith.verify.symbolic import prove

    for c in (CONTRACTS[2], CONTRACTS[4], CONTRACTS[6]):
        (rep,) = prove(c)
        st = {(o.name, o.subject): o.status for o in rep.obligations}
        bad = {k: v for k, v in st.items() if k[0] in ("in_bounds", "int32_no_overflow", "race_free") and v != "proved"}
        assert not bad, (c.name, bad)
        if "partial" in c.name:  # the page gather was traced (and proved)
            assert any(k[0] == "in_bounds" and "table_ptr" in k[1] for k in st), st
        assert all(v == "proved" or v.startswith("bounded") for v in st.values()), st


def test_a_plan_overrunning_its_block_table_is_found():
    """Planted in the contract: work items may end past the capacity MB * P (a plan that ignores the
    table's width): the prover must find the out-of-bounds block-table read, with a counterexample."""
    from dataclasses import replace

    from warpsmith.ops.attention.decode.contract import CONTRACTS, MB, S
    from warpsmith.verify.symbolic import Tensor, prove

    c = CONTRACTS[2]
    args = dict(c.args)
    args["work_end_ptr"] = Tensor((args["work_end_ptr"].shape[0],), (1,), values=(0, MB * 16 + 17))
    bad = replace(c, args=args, name=c.name + "[overrun]")
    (rep,) = prove(bad)
    failed = [o for o in rep.obligations if o.status == "failed"]
    assert failed and failed[0].name == "in_bounds" and "table_ptr" in failed[0].subject, \
        [(o.name, o.subject, o.status) for o in rep.obligations]
    assert S is not None
