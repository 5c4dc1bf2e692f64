"""Build the paper's PDF with latexmk in a scratch folder, and read LaTeX's log for the problems
that fail a build (undefined references, overfull boxes, floats too large)."""

from __future__ import annotations

import hashlib
import logging
import os
import re
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from kernels.core.files import write_atomic

log = logging.getLogger("kernels.paper.latex")

#: Debian packages that provide what the paper needs (LaTeX, latexmk, pdffonts).
TEX_PACKAGES = ("latexmk texlive-latex-base texlive-latex-recommended texlive-science "
                "lmodern poppler-utils")


def paper_scratch(out_pdf: str | os.PathLike) -> Path:
    """The folder :func:`build_paper` builds ``out_pdf`` in: ``latex/<name>`` under
    ``$ARTIFACT_TMPDIR`` (default ``.tmp/``, as :func:`kernels.core.files.write_atomic`)."""
    out = Path(out_pdf).resolve()
    name = f"{out.parent.name}-{hashlib.sha1(str(out).encode()).hexdigest()[:8]}"
    return Path(os.environ.get("ARTIFACT_TMPDIR", ".tmp"), "latex", name).resolve()


def build_paper(main_tex: str, out_pdf: str, inputs: Sequence[str] = ()) -> None:
    """Build ``main_tex`` with latexmk (pdflatex, bibtex) into ``out_pdf``.

    The build runs in a scratch folder (:func:`paper_scratch`), emptied
    first, that holds links to ``main_tex`` and ``inputs`` (the bibliography,
    figures and generated tables: the rule's inputs) at their places relative
    to one another; LaTeX writes its files there, and the PDF is then moved
    to ``out_pdf`` atomically. So a killed build leaves ``out_pdf`` as it was,
    and neither its leftovers nor LaTeX files beside ``main_tex`` reach the
    next build. LaTeX's log is copied beside ``out_pdf`` (``main.log``).

    Raises RuntimeError when latexmk is not installed, naming the Debian
    packages to install, or when the build fails (the log's end is included).
    """
    if shutil.which("latexmk") is None:
        raise RuntimeError(f"no TeX engine found (latexmk): install the Debian packages "
                           f"`{TEX_PACKAGES}` to build the paper; every other output is made")
    main = Path(main_tex).resolve()
    files = sorted({main, *(Path(p).resolve() for p in inputs)})
    root = Path(os.path.commonpath([f.parent for f in files]))
    scratch = paper_scratch(out_pdf)
    shutil.rmtree(scratch, ignore_errors=True)
    for f in files:
        link = scratch / f.relative_to(root)
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(f)
    workdir = scratch / main.parent.relative_to(root)
    env = dict(os.environ, FORCE_SOURCE_DATE="1",
               SOURCE_DATE_EPOCH=os.environ.get("SOURCE_DATE_EPOCH", "0"))
    cmd = ["latexmk", "-pdf", "-g", "-interaction=nonstopmode", "-halt-on-error", main.name]
    # LaTeX prints a box's text in its font encoding (T1's bytes are not UTF-8)
    proc = subprocess.run(cmd, cwd=workdir, env=env, capture_output=True, encoding="utf-8", errors="replace")
    built_log = workdir / main.with_suffix(".log").name
    logtext = built_log.read_text(errors="replace") if built_log.exists() else ""
    write_atomic(Path(out_pdf).with_suffix(".log"), logtext)
    if proc.returncode != 0:
        raise RuntimeError(f"latexmk failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{logtext[-3000:]}")
    problems = paper_problems(logtext)
    if problems:
        raise RuntimeError("the paper built with problems:\n" + "\n".join(problems))
    write_atomic(out_pdf, (workdir / main.with_suffix(".pdf").name).read_bytes())
    log.info("built %s", out_pdf)


def paper_problems(logtext: str) -> list[str]:
    """Undefined references or citations, floats too large for their page (LaTeX cuts them off), and
    overfull boxes wider than 1 pt, in a LaTeX log."""
    problems = [line for line in logtext.splitlines()
                if re.search(r"(Reference|Citation) .* undefined|There were undefined|Float too large", line)]
    for match in re.finditer(r"Overfull \\[hv]box \(([\d.]+)pt too \w+\)[^\n]*", logtext):
        if float(match.group(1)) > 1.0:
            problems.append(match.group(0))
    return problems
