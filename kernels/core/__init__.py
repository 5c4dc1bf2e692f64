"""The measurement core: the modules a study's measurement imports, so a change to any of them
changes every study's fingerprint (``fingerprint``), but for those that only record what ran and
where (``env``, ``fingerprint``, ``gpustate``: ``fingerprint.RECORD_ONLY``). ``harness`` (the plug-in contract; prepare,
check and time one case), ``jobs`` (the job runner: every case of one implementation,
checkpoints, the compile-ahead job), ``children`` (a case in a fresh process), ``ahead`` (cases
prepared in parallel before any is timed), ``passes`` (the timed call of each pass), ``timing``
(device time and latency), ``correctness`` (errors against the reference, tolerances),
``launch`` (Triton launch helpers), ``profiling`` (per-kernel times), ``registry`` (each
study's implementations), ``env`` (each row's environment), ``gpustate`` (what the GPU did
around each case: clocks, power, temperature), ``fingerprint`` (the digest of the
code and config that measure a study), ``checks`` (checks that stop a run before it can harm
the data), ``gpulease`` (one GPU per measurement job), ``files`` (atomic writes), ``logs``.
None of them imports the paper layer (``kernels.paper``).
"""
