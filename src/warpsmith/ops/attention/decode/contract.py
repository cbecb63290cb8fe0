"""Launch contracts of the decode kernels, for ``warpsmith prove`` (see verify/symbolic/contract.py).

Tensors are declared as the launchers see them in the common case: contiguous q, caches and outputs
(the caches in their layout: contiguous (B, Hk, S, D), NHD [NB, P, Hk, D], HND [NB, Hk, P, D], MLA
[NB, P, Dc] with [NB, P, Dr]); the fp32 partials as the launcher allocates them. What the kernels
may assume about the *values* of the integer inputs is declared with ``values=(lo, hi)``:

- the plan (plan.py): ``work_batch`` in [0, B), ``work_start`` and ``work_end`` in [0, S]
  (S: the capacity, ``MB * P`` for a block table), ``batch_indptr`` in [0, W];
- page indices (block table entries, CSR ``kv_indices``) in [0, NB): the precondition that every
  page index names a page of the pool;
- CSR ``kv_indptr`` in [0, NNZ]: nothing else. The kernel masks each token to its sequence's own
  pages (``j < indptr[b + 1] - indptr[b]``), so the ``kv_indices`` gather is in bounds for any
  plan: even one whose ``end`` overruns the sequence's pages.

Under these, ``in_bounds`` and ``int32_no_overflow`` are proved for every size in the domain and
every program of the padded grid (W work items, padding included: an empty item loads nothing from
the cache). Which tokens each item covers (the split of each sequence into items, exactly once) is
a property of the plan's values, not of the kernel's indexing: it is tested on the planners
(tests/ops/test_attention_decode_plan.py), not proved here.
"""
from __future__ import annotations

from typing import Any, Mapping

from ....verify.symbolic import LaunchContract, Tensor, cdiv, sizes
from . import kernel as K_

B, HK, G, S, D, DPE, W, NB, MB, NNZ, T = sizes("B HK G S D DPE W NB MB NNZ T")
DOMAIN = [B <= 2**20, HK <= 4096, G <= 4096, HK * G <= 2**16, S <= 2**24, D <= 1024, DPE <= 256, W <= 2**24,
          NB <= 2**24, MB <= 2**20, NNZ <= 2**26, T <= 16]


def _bounded(table: str, mla: bool, page: int, direct: bool = False) -> list[dict[str, int]]:
    out = []
    for b, hk, g, s, d, w in ((1, 1, 1, 1, 1, 1), (2, 2, 3, 2 * page + 1, 5, 4), (3, 1, 17, 3, 2, 6)):
        hk = 1 if mla else hk
        mb = -(-s // page)
        sh = {"B": b, "HK": hk, "G": g, "S": mb * page if table == "block_table" else s, "D": d, "DPE": 3,
              "W": b if direct else w, "T": 2,
              "NB": 7, "MB": mb, "NNZ": 5}
        out.append(sh)
    return out


def partial(table: str, layout: str, mla: bool, constexprs: list[dict], direct: bool = False) -> LaunchContract:
    """The contract of ``decode_partial_kernel`` for one table form, cache layout and op (``MULTI``: T query
    tokens per sequence, q (B, T, Hq, D); else T = 1)."""
    page = constexprs[0]["PAGE"]
    P = page if table != "none" else 1
    hq = HK * G
    multi = bool(constexprs[0].get("MULTI"))
    QT = T if multi else 1
    dummy = Tensor((1,), (1,))
    if mla:
        cache = Tensor((NB, P, D), (P * D, D, 1))
        k_strides = (P * D, D, 0, 1)
        kpe = Tensor((NB, P, DPE), (P * DPE, DPE, 1))
        qpe = Tensor((B, QT, hq, DPE), (QT * hq * DPE, hq * DPE, DPE, 1))
        kv = {"k_ptr": cache, "v_ptr": cache, "kpe_ptr": kpe, "qpe_ptr": qpe}
        v_strides = k_strides
        pe_strides = {"stride_qpb": QT * hq * DPE, "stride_qpt": hq * DPE, "stride_qph": DPE, "stride_qpd": 1,
                      "stride_kpp": P * DPE, "stride_kps": DPE, "stride_kpd": 1}
    else:
        if table == "none":
            cache = Tensor((B, HK, S, D), (HK * S * D, S * D, D, 1))
            k_strides = (HK * S * D, D, S * D, 1)
        elif layout == "NHD":
            cache = Tensor((NB, P, HK, D), (P * HK * D, HK * D, D, 1))
            k_strides = (P * HK * D, HK * D, D, 1)
        else:
            cache = Tensor((NB, HK, P, D), (HK * P * D, P * D, D, 1))
            k_strides = (HK * P * D, D, P * D, 1)
        v_strides = k_strides
        kv = {"k_ptr": cache, "v_ptr": cache, "kpe_ptr": dummy, "qpe_ptr": dummy}
        pe_strides = {k: 0 for k in ("stride_qpb", "stride_qpt", "stride_qph", "stride_qpd", "stride_kpp", "stride_kps",
                                     "stride_kpd")}
    span = MB * P if table == "block_table" else S
    if table == "block_table":
        tables = {"table_ptr": Tensor((B, MB), (MB, 1), values=(0, NB)), "indptr_ptr": dummy}
        t_strides = {"stride_tb": MB, "stride_tn": 1}
    elif table == "csr":
        tables = {"table_ptr": Tensor((NNZ,), (1,), values=(0, NB)),
                  "indptr_ptr": Tensor((B + 1,), (1,), values=(0, NNZ + 1))}
        t_strides = {"stride_tb": 0, "stride_tn": 1}
    else:
        tables = {"table_ptr": dummy, "indptr_ptr": dummy}
        t_strides = {"stride_tb": 0, "stride_tn": 0}
    rows = B if direct else W
    args: dict[str, Any] = {
        "q_ptr": Tensor((B, QT, hq, D), (QT * hq * D, hq * D, D, 1)), **kv, **tables,
        "lens_ptr": Tensor((B,), (1,), values=(0, span + 1)) if multi else dummy,
        "work_batch_ptr": Tensor((W,), (1,), values=(0, B)),
        "work_start_ptr": Tensor((W,), (1,), values=(0, span + 1)),
        "work_end_ptr": Tensor((W,), (1,), values=(0, span + 1)),
        "o_ptr": Tensor((rows, QT, hq, D), (QT * hq * D, hq * D, D, 1), output=True),
        "lse_ptr": Tensor((rows, QT, hq), (QT * hq, hq, 1), output=True),
        "G": G, "QT": QT, "D": D, "DV": D, "DPE": DPE if mla else 0, "sm_scale": 1, "softcap": 1,
        "stride_qb": QT * hq * D, "stride_qt": hq * D, "stride_qh": D, "stride_qd": 1,
        "stride_kp": k_strides[0], "stride_ks": k_strides[1], "stride_kh": k_strides[2], "stride_kd": k_strides[3],
        "stride_vp": v_strides[0], "stride_vs": v_strides[1], "stride_vh": v_strides[2], "stride_vd": v_strides[3],
        **pe_strides, **t_strides,
        "stride_ow": QT * hq * D, "stride_ot": hq * D, "stride_oh": D, "stride_od": 1,
        "stride_lw": QT * hq, "stride_lt": hq, "stride_lh": 1,
    }
    domain = list(DOMAIN) + [D <= constexprs[0]["BLOCK_D"], DPE <= constexprs[0]["BLOCK_DPE"]]
    if mla:
        domain.append(HK == 1)
    if direct:
        domain.append(W == B)  # one item per sequence, item b is sequence b
    name = f"decode_partial_kernel[{table}{'' if table == 'none' or mla else ',' + layout}{',mla' if mla else ''}" \
           f"{',direct' if direct else ''}{',multi' if multi else ''}]"
    return LaunchContract(kernel=K_.decode_partial_kernel, name=name, args=args, constexprs=constexprs,
                          grid=lambda c: (W, HK, cdiv(QT * G, c["BLOCK_H"])), domain=domain,
                          bounded_shapes=_bounded(table, mla, page, direct))


def reduce(constexprs: list[dict]) -> LaunchContract:
    hq = HK * G
    args = {"o_part_ptr": Tensor((W, hq, D), (hq * D, D, 1)), "lse_part_ptr": Tensor((W, hq), (hq, 1)),
            "indptr_ptr": Tensor((B + 1,), (1,), values=(0, W + 1)),
            "out_ptr": Tensor((B, hq, D), (hq * D, D, 1), output=True), "lse_ptr": Tensor((B, hq), (hq, 1), output=True),
            "DV": D, "stride_pw": hq * D, "stride_ph": D, "stride_pd": 1, "stride_lpw": hq, "stride_lph": 1,
            "stride_ob": hq * D, "stride_oh": D, "stride_od": 1, "stride_lb": hq, "stride_lh": 1}
    return LaunchContract(kernel=K_.decode_reduce_kernel, name="decode_reduce_kernel", args=args, constexprs=constexprs,
                          grid=(B, hq), domain=list(DOMAIN) + [D <= constexprs[0]["BLOCK_DV"]],
                          bounded_shapes=_bounded("none", False, 1))


def _meta(c: Mapping[str, Any], page: int, table: str, d: int, dr: int, mla: bool, direct: bool,
          multi: bool = False) -> dict[str, Any]:
    from .limits import MIN_DOT, dot_pad

    return dict(PAGE=page, TABLE=table, BLOCK_N=c["BLOCK_N"], BLOCK_H=c["BLOCK_H"], BLOCK_D=dot_pad(d), BLOCK_DV=dot_pad(d),
                BLOCK_DPE=dot_pad(dr) if dr else MIN_DOT, HAS_PE=mla, SAME_KV=mla, SOFTCAP=False, DIRECT=direct,
                MULTI=multi, IS_FP32=False, EMULATE=False)


def for_config(variant: Any, problem: Any, config: Mapping[str, Any]) -> list[LaunchContract]:
    """The contracts of exactly the kernels and constexprs ``config`` launches for ``problem`` (GPU build)."""
    from ....core.variant import next_pow2

    hk, g, dqk, dv, dr = variant.dims(problem)
    a = problem.attrs
    mla = variant.mla
    table = a["table"] if (mla or a["cache"] == "paged") else "none"
    page = a["page_size"] if table != "none" else 1
    direct = config["NUM_SPLITS"] == 1
    meta = _meta(config, page, table, dqk, dr, mla, direct, problem.shape.get("T", 1) > 1)
    meta["SOFTCAP"] = bool(a["softcap"])
    out = [partial(table, a["layout"], mla, [meta], direct)]
    if not direct:
        out.append(reduce([{"BLOCK_DV": next_pow2(dv), "EMULATE": False}]))
    return out


_C = {"BLOCK_N": 16, "BLOCK_H": 16}
CONTRACTS = [
    partial("none", "NHD", False, [_meta(_C, 1, "none", 64, 0, False, False)]),
    partial("none", "NHD", False, [_meta(_C, 1, "none", 64, 0, False, True)], direct=True),
    partial("block_table", "NHD", False, [_meta(_C, 16, "block_table", 64, 0, False, False)]),
    partial("block_table", "HND", False, [_meta(_C, 1, "block_table", 64, 0, False, False)]),
    partial("csr", "NHD", False, [_meta(_C, 16, "csr", 64, 0, False, False)]),
    partial("block_table", "NHD", True, [_meta({"BLOCK_N": 32, "BLOCK_H": 64}, 64, "block_table", 512, 64, True, False)]),
    reduce([{"BLOCK_DV": 64, "EMULATE": False}]),
    partial("block_table", "NHD", False, [_meta(_C, 16, "block_table", 64, 0, False, False, multi=True)]),
]
