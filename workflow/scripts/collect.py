"""Snakemake script of rule `collect`: raw JSONL rows of one study -> one tidy CSV.

A bad row stops it with one line, ``path:line: what is wrong`` (a
:class:`kernels.paper.collect.RowError`), on the console and in the rule's log, without a
traceback; any other error ends it with its traceback."""

import logging
import sys

from kernels.paper.collect import RowError, collect
from kernels.core.logs import setup_logging

setup_logging(snakemake.log[0])  # noqa: F821
try:
    collect(snakemake.wildcards.study, list(snakemake.input), snakemake.params.gpu,  # noqa: F821
            snakemake.output[0], dict(snakemake.params.section),  # noqa: F821
            bool(snakemake.params.configured))  # noqa: F821
except RowError as exc:
    logging.getLogger("kernels.paper.collect").error("%s", exc)
    sys.exit(1)
