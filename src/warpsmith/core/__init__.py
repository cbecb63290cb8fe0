"""The bottom layer: what every other part of warpsmith builds on, and imports nothing above it.

- :mod:`.errors`: the exceptions (public as :mod:`warpsmith.errors`);
- :mod:`.settings`: the one reader of ``WARPSMITH_*`` environment variables;
- :mod:`.dtypes`: dtype names and unit roundoffs;
- :mod:`.contract`: :class:`ErrorContract`, the accuracy an output must meet;
- :mod:`.opspec`: :class:`OpSpec` (what an op computes) and :class:`Problem` (one instance of it);
- :mod:`.variant`: :class:`Variant` (how an op is computed: kernel, launcher, space, validity, guards);
- :mod:`.registry`: :class:`Registry`, built by :mod:`warpsmith.ops` from the families' declarations;
- :mod:`._triton`: imports Triton natively or under its CPU interpreter (before any kernel module);
- :mod:`.lazy`: the ``__getattr__`` of a package whose names are imported on first use.
"""
