"""Detection of the current device and the fingerprint stored with every record."""
from __future__ import annotations

import functools
import platform
import subprocess
from dataclasses import dataclass, replace

import torch

from ..core.version import __version__
from ..core.settings import settings
from .models import TARGETS, Target, get_target


@dataclass(frozen=True)
class Device:
    """What we run on. ``kind`` is "cuda", "rocm", "cpu" (Triton interpreter) or "compile-only"
    (kernels compiled for ``target``'s GPU and never run: ``warpsmith gpucheck``)."""

    kind: str
    name: str
    target: Target
    measured: bool  # True when timings can be measured (a GPU is present and not forced off)


def _match(name: str) -> Target | None:
    low = name.lower()
    for t in TARGETS.values():
        if t.name in low.replace(" ", "") or any(a in low for a in t.aliases):
            return get_target(t.name)  # with a calibration file's peaks where one applies
    return None


@functools.lru_cache(maxsize=1)
def current_device() -> Device:
    """The device kernels run on now, and the hardware model to predict for.

    With no GPU, kernels run under Triton's interpreter on the CPU, nothing is
    measured, and the target is ``WARPSMITH_TARGET`` (default h100).
    """
    from ..core._triton import COMPILE_ONLY_ARCH, INTERPRET

    if COMPILE_ONLY_ARCH:
        return Device("compile-only", f"compile-only ({COMPILE_ONLY_ARCH}, nothing runs)",
                      get_target(settings().target), measured=False)
    if torch.cuda.is_available() and not INTERPRET:
        name = torch.cuda.get_device_name(0)
        kind = "rocm" if torch.version.hip else "cuda"
        target = _match(name)
        if target is None:  # unknown GPU: a model from its properties, marked approximate
            props = torch.cuda.get_device_properties(0)
            base = TARGETS["mi300x" if kind == "rocm" else "h100"]
            scale = props.multi_processor_count / base.sms
            target = replace(
                base, name=name.lower().replace(" ", "-"), sms=props.multi_processor_count, approximate=True,
                peak_tflops={k: v * scale for k, v in base.peak_tflops.items()},
            )
        return Device(kind, name, target, measured=True)
    return Device("cpu", f"cpu ({platform.processor() or platform.machine()}, Triton interpreter)",
                  get_target(settings().target), measured=False)


def measures(target: Target) -> bool:
    """True when timings for ``target`` are measured here (this GPU is that target), else predicted."""
    dev = current_device()
    return dev.measured and dev.target.name == target.name


@functools.lru_cache(maxsize=1)
def driver_version() -> str | None:
    if not torch.cuda.is_available():
        return None
    cmd = ["rocm-smi", "--showdriverversion"] if torch.version.hip else [
        "nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=10, check=True).stdout
        return out.strip().splitlines()[0].strip() or None
    except (OSError, subprocess.SubprocessError, IndexError):
        return None


def versions() -> dict[str, str | None]:
    import triton

    return {"warpsmith": __version__, "torch": torch.__version__, "triton": triton.__version__,
            "cuda": torch.version.cuda, "hip": torch.version.hip, "python": platform.python_version()}


def fingerprint(source_hash: str) -> dict[str, str | None]:
    """What a tuning record was obtained on: GPU, driver, tool versions and the kernel's source hash."""
    dev = current_device()
    v = versions()
    return {"gpu": dev.name, "driver": driver_version(), "triton": v["triton"],
            "torch": v["torch"], "warpsmith": v["warpsmith"], "source_hash": source_hash}
