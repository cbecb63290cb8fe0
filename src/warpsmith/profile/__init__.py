"""See where the time goes: per-kernel reports, roofline plots and Perfetto traces.

- :mod:`.collect`: an op, shape and config on a target, kernel by kernel: the static machine-code
  model (``cost/static_sass.py``) beside the op's roofline and the analytic cost model;
- :mod:`.report`: the table (text and HTML);
- :mod:`.roofline`: the target's ceilings and the kernels as points (PNG, self-contained HTML);
- :mod:`.trace`: Chrome trace-event JSON for ui.perfetto.dev (a recorder passed to ``tune``, and
  a profile's kernel sequence).

Every figure is predicted unless a GPU measured it, and says which.
"""
