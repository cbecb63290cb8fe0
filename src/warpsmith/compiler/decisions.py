"""Decisions on rewrite sites that the sequence search forces (:mod:`.sequence`).

Every rewrite pass (:mod:`.rewrite`, :mod:`.algebra`, :mod:`.lower_softmax_attention`, :mod:`.views`,
:mod:`.split`, :mod:`.gemm_epilogue`) decides each site it finds by the cost model (taken when the
program is predicted cheaper under greedy fusion) and asks :func:`decided` first: inside
:func:`forcing`, a site the sequence search has decided (apply, or keep as written) takes that
decision instead; every other site, and every site outside :func:`forcing`, keeps the model's.
A site is named by :func:`site` (the rewrite, its rule where it has one, the node it is at).
"""
from __future__ import annotations

import contextlib
import contextvars
from typing import Iterator, Mapping

_FORCED: contextvars.ContextVar[Mapping[str, bool] | None] = contextvars.ContextVar("forced_sites", default=None)


def site(rewrite: str, at: str, rule: str | None = None) -> str:
    """The name of a rewrite site: ``rewrite[:rule]@node``."""
    return f"{rewrite}{':' + rule if rule else ''}@{at}"


def decided(rewrite: str, at: str, model: bool, rule: str | None = None) -> bool:
    """Whether the site is taken: the forced decision where :func:`forcing` gives one, else ``model``."""
    forced = _FORCED.get()
    if forced is None:
        return model
    return forced.get(site(rewrite, at, rule), model)


@contextlib.contextmanager
def forcing(decisions: Mapping[str, bool]) -> Iterator[None]:
    """Within the block, the sites named in ``decisions`` (:func:`site`) are taken or not as it says."""
    token = _FORCED.set(dict(decisions))
    try:
        yield
    finally:
        _FORCED.reset(token)
