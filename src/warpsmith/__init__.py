"""warpsmith: search-based GPU kernel compiler with verified results."""
__version__ = "0.1.0"
