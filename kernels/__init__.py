"""Kernels, their references and the measurement code of the paper artifact.

One sub-package per study (``swiglu``, ``flex``, ``gdn``), each holding its
kernels, the plain-PyTorch reference beside them, the sweep (``study.py``)
and its figures, tables and quoted numbers (``report.py``). Shared pieces:
``harness`` (measuring), ``collect`` (tidy tables), ``style`` (figures),
``latex`` (tables and macros). Importing this package imports no torch.
"""
