"""Rotary position embedding (GPT-NeoX and GPT-J layouts, partial rotary, q and k in one launch)."""
