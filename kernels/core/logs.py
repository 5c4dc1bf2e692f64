"""Logging of the pipeline's scripts: INFO lines to stderr and to the rule's log file."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path


def _log_uncaught(kind, exc, tb) -> None:
    """``sys.excepthook``: an uncaught exception's traceback goes to every log handler."""
    logging.getLogger("kernels").critical("uncaught exception, the job failed:", exc_info=(kind, exc, tb))


def setup_logging(logfile: str | os.PathLike | None = None) -> None:
    """Log INFO lines to stderr and, when given, to ``logfile`` (a Snakemake rule's log).

    The traceback of an exception that ends the script is logged there too
    (``sys.excepthook``), so a rule's log says why its job failed.
    """
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    if logfile:
        Path(logfile).parent.mkdir(parents=True, exist_ok=True)
        handlers.append(logging.FileHandler(logfile, mode="w"))
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s",
                        handlers=handlers, force=True)
    for noisy in ("fontTools", "matplotlib"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    sys.excepthook = _log_uncaught
