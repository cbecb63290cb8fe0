"""The prefill attention kernels' limits and derived launch arguments (head blocks, window clamps), one
definition for the launchers (variant.py) and the launch contracts (contract.py)."""
from __future__ import annotations

from typing import Any, Mapping

from ...core.opspec import Problem
from ...core.variant import next_pow2
from .spec import ATTENTION

INDEX_LIMIT = 2**31  # offsets within one sequence are int32
MAX_BLOCK = 128


def head_blocks(p: Problem) -> tuple[int, int]:
    """BLOCK_D and BLOCK_DV: the head dims padded to powers of two, at least 16 (tl.dot's minimum)."""
    d = ATTENTION.dims(p)
    return max(16, next_pow2(d["D"])), max(16, next_pow2(d["Dv"]))


def window_args(attrs: Mapping[str, Any], sq: int, sk: int) -> dict[str, int]:
    """The kernels' window arguments: HAS_LO/HAS_HI and win_lo/win_hi clamped to ``sq + sk`` (no
    effect beyond: every key is within that distance of every diagonal), so ``i + off + win`` never
    leaves int32."""
    cap = sq + sk
    wl, wr = int(attrs.get("window_left", -1)), int(attrs.get("window_right", -1))
    causal = bool(attrs.get("causal"))
    has_hi = causal or wr >= 0
    win_hi = 0 if causal else min(wr, cap) if wr >= 0 else 0
    return {"HAS_LO": wl >= 0, "HAS_HI": has_hi, "win_lo": min(wl, cap) if wl >= 0 else 0, "win_hi": win_hi,
            "align_br": int(attrs.get("align", "bottom_right") == "bottom_right")}
