"""Dispatch at call time and the torch.library custom ops."""
from .dispatch import Choice, clear_cache, launch, select

__all__ = ["Choice", "clear_cache", "launch", "select"]
