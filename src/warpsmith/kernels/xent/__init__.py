"""Cross-entropy on logits (single-pass and looped), its backward, and the chunked fused linear cross-entropy."""
