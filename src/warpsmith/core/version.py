"""warpsmith's version (recorded in every tuning record's fingerprint)."""
__version__ = "0.1.0"
