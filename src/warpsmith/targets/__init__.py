"""Hardware models, device detection, and what the compiler tells us about a kernel (:mod:`.compiler`)."""
from .compiler.facts import ConfigFacts, KernelFacts
from .detect import Device, current_device, fingerprint, measures, versions
from .models import TARGETS, Target, Throughput, get_target

__all__ = ["Device", "current_device", "fingerprint", "measures", "versions", "TARGETS", "Target", "Throughput", "get_target",
           "ConfigFacts", "KernelFacts"]
