"""The split weight gradient's launch contracts, for ``warpsmith prove warpsmith.ops.conv.wgrad_contract``:
``conv_wgrad_kernel`` with SPLIT (the workspace ``p[s, g, k, j]``) and the matmul family's ordered
reduction it feeds (contract.wgrad_for_config proves a tuned config's own pair at tune time).

A module of its own, not an entry of ``contract.CONTRACTS``: building these z3 terms when that module is
imported changes the solver's history for the forward kernel's proofs proved after it, and the split
forward's int32 obligation, near its budget's edge, then goes unknown (seen in
tests/ops/test_conv_proofs.py); here it is built only when asked for.
"""
from __future__ import annotations

from .contract import _wgrad_meta, wgrad, wgrad_reduce

CONTRACTS = [wgrad([_wgrad_meta(SPLIT=True)]), wgrad_reduce()]
