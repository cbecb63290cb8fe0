"""Hardware models and device detection."""
from .compiled import ConfigFacts, KernelFacts
from .detect import Device, current_device, fingerprint, measures, versions
from .models import TARGETS, Target, get_target

__all__ = ["Device", "current_device", "fingerprint", "measures", "versions", "TARGETS", "Target", "get_target",
           "ConfigFacts", "KernelFacts"]
