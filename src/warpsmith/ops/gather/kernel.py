"""Gather and scatter kernels (only ``@triton.jit`` code).

Every op of the family is one of two kernels over a 3-D view ``(A, J, B)`` of the index tensor,
the gathered/scattered dim being the middle one (``V`` entries in the table side):

- ``gather_kernel``: ``out[a, j, b] = src[a, idx[a, j, b], b]``. Row gather (``embedding``,
  ``index_select``, ``x[idx]``) is the index broadcast along ``a`` and ``b`` (strides 0): every lane
  of a row reads the same index, which the cache serves. Bytes: ``A J B (2 e + i)`` (``e`` the data
  element, ``i`` the index element; a row gather reads its index once per row in DRAM terms); no FLOPs.
- ``scatter_kernel``: ``out[a, idx[a, j, b], b] (+)= src[a, j, b]`` (or a scalar ``value``), lanes
  whose index equals ``skip`` left out (``embedding``'s ``padding_idx``). ``ADD``: ``tl.atomic_add``
  into an fp32 accumulator (``index_add``, ``scatter_add``, the embedding backward); else
  ``tl.atomic_xchg`` (``scatter``: with duplicate indices one of the writers wins, in no fixed
  order, as torch documents for ``scatter_``; ``EMULATE``: a plain store under the interpreter, which
  runs programs one at a time and has no float ``atomic_xchg``). Bytes: ``A J B (e + i + 2 * 4)`` (a read-modify-write
  of fp32); FLOPs ``A J B`` additions when ``ADD``.

The program id enumerates ``(a, j-block, b-block)`` on one grid axis (``b`` fastest); offsets are
int64 from the program id on. The kernels trust the index values to lie in ``[0, V)`` (``skip``
aside): the launchers check that on the host first (:mod:`.variant`), and the launch contracts
declare it (``Tensor(values=(0, V))``), so the prover shows every access in bounds for all shapes.
"""
from ...core._triton import tl, triton


@triton.jit
def gather_kernel(src_ptr, idx_ptr, out_ptr, A, J, B, V,
                  stride_sa, stride_sv, stride_sb, stride_ia, stride_ij, stride_ib, stride_oa, stride_oj, stride_ob,
                  BLOCK_J: tl.constexpr, BLOCK_B: tl.constexpr):
    pid = tl.program_id(0)
    n_b = (B + BLOCK_B - 1) // BLOCK_B
    n_j = (J + BLOCK_J - 1) // BLOCK_J
    bb = pid % n_b
    t = pid // n_b
    jb = t % n_j
    a = (t // n_j).to(tl.int64)
    j = (jb * BLOCK_J + tl.arange(0, BLOCK_J)).to(tl.int64)
    b = (bb * BLOCK_B + tl.arange(0, BLOCK_B)).to(tl.int64)
    mask = (j[:, None] < J) & (b[None, :] < B)
    idx = tl.load(idx_ptr + a * stride_ia + j[:, None] * stride_ij + b[None, :] * stride_ib, mask=mask, other=0)
    v = tl.load(src_ptr + a * stride_sa + idx.to(tl.int64) * stride_sv + b[None, :] * stride_sb, mask=mask, other=0)
    tl.store(out_ptr + a * stride_oa + j[:, None] * stride_oj + b[None, :] * stride_ob, v, mask=mask)


@triton.jit
def scatter_kernel(src_ptr, idx_ptr, out_ptr, A, J, B, V, skip, value,
                   stride_sa, stride_sj, stride_sb, stride_ia, stride_ij, stride_ib, stride_oa, stride_ov, stride_ob,
                   BLOCK_J: tl.constexpr, BLOCK_B: tl.constexpr, ADD: tl.constexpr, HAS_SRC: tl.constexpr,
                   EMULATE: tl.constexpr):
    pid = tl.program_id(0)
    n_b = (B + BLOCK_B - 1) // BLOCK_B
    n_j = (J + BLOCK_J - 1) // BLOCK_J
    bb = pid % n_b
    t = pid // n_b
    jb = t % n_j
    a = (t // n_j).to(tl.int64)
    j = (jb * BLOCK_J + tl.arange(0, BLOCK_J)).to(tl.int64)
    b = (bb * BLOCK_B + tl.arange(0, BLOCK_B)).to(tl.int64)
    mask = (j[:, None] < J) & (b[None, :] < B)
    idx = tl.load(idx_ptr + a * stride_ia + j[:, None] * stride_ij + b[None, :] * stride_ib, mask=mask, other=0)
    keep = mask & (idx != skip)
    if HAS_SRC:
        v = tl.load(src_ptr + a * stride_sa + j[:, None] * stride_sj + b[None, :] * stride_sb, mask=mask,
                    other=0).to(tl.float32)
    else:
        v = tl.zeros([BLOCK_J, BLOCK_B], dtype=tl.float32) + value
    dst = out_ptr + a * stride_oa + idx.to(tl.int64) * stride_ov + b[None, :] * stride_ob
    if ADD:
        tl.atomic_add(dst, v, mask=keep)
    elif EMULATE:  # Triton's CPU interpreter has no float atomic_xchg; it runs programs one at a time
        tl.store(dst, v, mask=keep)
    else:
        tl.atomic_xchg(dst, v, mask=keep)
