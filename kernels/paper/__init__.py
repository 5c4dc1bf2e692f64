"""The paper layer: from committed rows to the PDF. ``rows`` (row schemas, case identity),
``collect`` (tidy tables), ``render`` (figures, LaTeX, macros, PDF), ``report_kit`` (what the
reports share: formats, lookups, verdicts), ``style`` (figures), ``claims`` (a run's claims
re-derived through the reports), ``reproduce`` (a second run against the first, judged),
``reproduce_tables`` (its tables and figure), ``reproduce_report`` (its macros and paragraph for the
paper, and the check that writes them all), ``gpu_factor`` (how fast one
GPU is against another of its model), ``models`` (every committed GPU model side by side), ``bounds`` (what bounds a kernel, from its device
time on two models),
``quick`` (the quick run's claims on any GPU beside every committed model's), ``provenance`` (each
study's run and whether today's code measured it), ``runs`` (every measuring run in the data, its role
and outcome), ``uncertainty`` (each quoted value's range over the GPUs of a model beside its within-run
interval), ``latex`` (the PDF's build and its log check).
A change here leaves every study's rows current.
"""
