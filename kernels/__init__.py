"""Kernels, their references and the measurement code of the paper artifact.

One sub-package per study (those that config/config.yaml lists under
studies), each holding its kernels, the plain-PyTorch reference beside them,
its display name and implementations (``impls.py``), the sweep (``study.py``)
and its figures, tables and quoted numbers (``report.py``). Shared modules:
``harness`` (the plug-in contract; prepare, check and time one case), ``jobs``
(the job runner: every case of one implementation, checkpoints, the compile-ahead
job), ``children`` (a case in a fresh process), ``ahead`` (cases prepared in
parallel before any is timed), ``passes``
(the timed call of each pass), ``timing`` (device time and latency),
``correctness`` (errors against the reference, tolerances), ``launch``
(Triton launch helpers), ``profiling`` (per-kernel times), ``env`` (each
row's environment), ``checks`` (checks that stop a run before it can harm
the data), ``gpulease`` (one GPU per measurement job), ``files`` (atomic
writes), ``logs``, ``rows`` (row schemas, case identity), ``collect`` (tidy
tables), ``render`` (figures, LaTeX, macros, PDF), ``report_kit`` (what the
reports share: formats, lookups, verdicts), ``style`` (figures),
``reproduce`` (a second run against the first). Importing this package
imports no torch.
"""
