"""Decode attention over contiguous or paged KV caches, and MLA (``attention_decode``,
``attention_decode_mla``): spec.py, the split-KV work plan plan.py, kernel.py, variant.py, launch
contracts contract.py, the opt-in index checks check.py, the public functions op.py."""
