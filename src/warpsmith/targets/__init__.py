"""Hardware models and device detection."""
from .detect import Device, current_device, fingerprint, measures, source_hash, versions
from .compiled import ConfigFacts, KernelFacts
from .models import TARGETS, Target, get_target

__all__ = ["Device", "current_device", "fingerprint", "measures", "source_hash", "versions", "TARGETS", "Target", "get_target",
           "ConfigFacts", "KernelFacts"]
