"""Typed search-space fragments and the spaces built from them."""
from .fragments import Bool, Enum, Fragment, IntRange, Pow2, choices, fixed
from .space import JointSpace, Point, Space

__all__ = ["Bool", "Enum", "Fragment", "IntRange", "Pow2", "choices", "fixed", "JointSpace", "Point", "Space"]
