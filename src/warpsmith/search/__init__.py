"""Search strategies: propose points of a search space, learn from their measured times."""
from .strategy import STRATEGIES, Strategy, make_strategy
from .random_search import RandomSearch
from .evolutionary import Evolutionary
from .pattern import PatternSearch

__all__ = ["STRATEGIES", "Strategy", "make_strategy", "RandomSearch", "Evolutionary", "PatternSearch"]
