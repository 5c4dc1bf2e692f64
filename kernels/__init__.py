"""Kernels, their references and the measurement code of the paper artifact, in three layers.

- The studies, one sub-package each (those that config/config.yaml lists under studies): its
  kernels with the plain-PyTorch reference beside them, its display name and implementations
  (``impls.py``), the sweep (``study.py``) and its figures, tables and quoted numbers
  (``report.py``).
- ``core``, the measurement core: what a study's measurement imports (its timing, the job
  runner, the GPU lease, the checks, the fingerprint of the code that measures). A change here
  makes every study's rows stale (``kernels.core.fingerprint``), but one to what only records
  (the environment block, the fingerprint, each row's GPU state).
- ``paper``, the paper layer: rows to tidy tables, figures, LaTeX, the numbers quoted, the
  reproduction check and each study's provenance. It imports the core; the core never imports it.

Importing this package imports no torch.
"""
