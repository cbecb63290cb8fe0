"""Softmax and log-softmax over the last dimension, forward and backward (kernel.py, variant.py)."""
