"""``@triton.autotune`` under Triton's CPU interpreter: the first config, not a benchmark.

The autotuner times every config with ``do_bench``, which needs a GPU driver; under the interpreter
(no GPU) a correct autotuned kernel would fail to run. :func:`first_config_autotune` makes the
autotuner's benchmark report the first config as fastest and every other as infinitely slow, so it
picks the first config (of those its pruning keeps) and never times anything. Correctness is what a
CPU check establishes; on a GPU the autotuner is left alone. Works with Triton 3.6 to 3.9, whose
``Autotuner._bench(*args, config, **meta)`` returns what ``min`` compares (a list of quantiles or a
float): all values returned here are lists, so they compare with each other.
"""
from __future__ import annotations

_INF = float("inf")


def first_config_autotune() -> None:
    """Patch Triton's autotuner (call once, before the candidate is imported and the patch snapshot)."""
    from triton.runtime.autotuner import Autotuner

    if getattr(Autotuner._bench, "_warpsmith_first_config", False):
        return

    def _bench(self, *args, config, **meta):  # noqa: ANN001 - Triton's signature
        return [0.0, 0.0, 0.0] if config is self.configs[0] else [_INF, _INF, _INF]

    _bench._warpsmith_first_config = True  # type: ignore[attr-defined]
    Autotuner._bench = _bench
