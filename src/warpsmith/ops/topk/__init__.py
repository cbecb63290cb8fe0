"""Top-k and sort over the last dim of short rows (``kernel.py``), the kernel the compiler lowers
``aten.topk`` and ``aten.sort`` to (MoE routers: k <= 8 of a few thousand experts or less).

Not yet a registered family (no spec, variants or launch contract): the compiler copies the kernel
into the programs it emits (``compiler/library.py``, ``compiler/lower_route.py``).
"""
