"""Normalization: RMSNorm and LayerNorm forward and backward (row, persistent and looped variants)."""
