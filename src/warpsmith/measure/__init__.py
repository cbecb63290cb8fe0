"""Compile and benchmark candidates (GPU), or predict them (no GPU)."""
from .evaluate import Evaluator, Score
from .timing import Timing, time_gpu

__all__ = ["Evaluator", "Score", "Timing", "time_gpu"]
