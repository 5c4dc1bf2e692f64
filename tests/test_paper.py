"""The paper as a reader gets it: every figure and table placed once and cited in the text
(a quick check of paper/main.tex against the studies' registries), and the PDF built from
the committed data: no undefined reference, no overfull box over 1 pt, every font embedded,
the page count the README states, commands that survive copying from the PDF, no page before
the references under a third full, and no figure of a measured study with a panel of empty axes."""

import importlib
import re
import shutil
import subprocess
import sys
from pathlib import Path

import matplotlib.pyplot as plt
import pytest
import yaml

from kernels.paper import reproduce_report
from kernels.paper.render import paper_tables

ROOT = Path(__file__).resolve().parent.parent
MAIN = ROOT / "paper" / "main.tex"
STUDIES = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())["studies"]


def _floats() -> list[str]:
    """The label of every figure and table the studies register (``fig:<name>``, ``tab:<name>``)."""
    labels = []
    for study in STUDIES:
        report = importlib.import_module(f"kernels.{study}.report")
        labels += [f"fig:{n}" for n in report.FIGURES] + [f"tab:{n}" for n in paper_tables(report)]
    return labels


def _cited(tex: str) -> set[str]:
    """Labels referenced by ``\\ref`` in ``tex`` (comments left out)."""
    text = re.sub(r"(?<!\\)%.*", "", tex)
    return {label for group in re.findall(r"\\ref\{([^}]*)\}", text) for label in group.split(",")}


def test_every_study_float_is_placed_once_and_cited_before_it_is_placed():
    tex = MAIN.read_text()
    for label in _floats():
        placed = [m.start() for m in re.finditer(re.escape(f"\\placefloat{{{label}}}"), tex)]
        assert len(placed) == 1, f"{label} placed {len(placed)} times in paper/main.tex"
        assert label in _cited(tex[:placed[0]]), f"{label} is placed before the text cites it"


def test_every_table_the_paper_does_not_set_is_named_by_its_csv_file():
    """A table of a report's ``TABLES`` left out of its ``PAPER_TABLES`` is the CSV file of rule
    ``table_csv`` alone: the text names it with ``\\tablecsv{<name>}`` (its path under results/tables/)."""
    tex = re.sub(r"(?<!\\)%.*", "", MAIN.read_text())
    for study in STUDIES:
        report = importlib.import_module(f"kernels.{study}.report")
        for name in set(report.TABLES) - set(paper_tables(report)):
            assert f"\\tablecsv{{{name}}}" in tex, f"paper/main.tex never names results/tables/{name}.csv"


def test_every_sparsity_median_of_the_flexattention_section_carries_its_interval():
    tex = MAIN.read_text()
    section = tex.split("\\label{sec:flex}", 1)[1].split("\\section{", 1)[0]
    medians = re.findall(r"\\([A-Za-z]+PctIdealMedian)(\\,\\%~\\[A-Za-z]+)?", section)
    assert medians and all(ci == f"\\,\\%~\\{name}Ci" for name, ci in medians), medians


def test_every_float_of_the_text_is_cited():
    tex = MAIN.read_text()
    labels = set(re.findall(r"\\label\{((?:fig|tab):[^}]*)\}", tex))
    assert labels, "no float labels in paper/main.tex"
    assert labels <= _cited(tex), f"never cited: {sorted(labels - _cited(tex))}"


def _claim_rows(tex: str) -> list[str]:
    """The body rows of the claims table (``tab:claims``): the text between its ``\\midrule`` and
    ``\\bottomrule``, split at each line that ends a row with ``\\\\``, comments left out."""
    table = re.sub(r"(?<!\\)%.*", "", tex.split("\\label{tab:claims}", 1)[1].split("\\end{tabular}", 1)[0])
    body = table.split("\\midrule", 1)[1].split("\\bottomrule", 1)[0]
    return [row.strip() for row in re.split(r"\\\\\s*$", body, flags=re.MULTILINE) if row.strip()]


def test_every_claim_cites_its_source_and_every_cited_key_is_in_the_bibliography():
    tex = MAIN.read_text()
    rows = _claim_rows(tex)
    assert len(rows) >= 10, f"{len(rows)} rows read from the claims table"
    for row in rows:
        claim = row.split("&", 1)[0]
        assert "\\cite" in claim, f"the claim {' '.join(claim.split())!r} cites no source"
    bib = (ROOT / "paper" / "references.bib").read_text()
    keys = set(re.findall(r"@\w+\{([^,\s]+),", bib))
    text = re.sub(r"(?<!\\)%.*", "", tex)
    cited = {k.strip() for group in re.findall(r"\\cite[pt]?\*?(?:\[[^]]*\])*\{([^}]*)\}", text)
             for k in group.split(",")}
    assert cited <= keys, f"cited but not in paper/references.bib: {sorted(cited - keys)}"


def test_every_claim_row_has_a_verdict_and_its_reproduction_status():
    """Each row of the claims table ends in one study's verdict macro followed by its reproduction status,
    the macro the reproduction check writes for it (``\\reprostatus{\\Repro<verdict>}``,
    :func:`kernels.paper.reproduce.claim_status`), and its verdicts on the other GPU models
    (``\\modelstatus{\\Models<verdict>}``, :func:`kernels.paper.models.other_verdicts`); every verdict of
    every study (``report.CLAIMS``) has its row: among them the SwiGLU study's on pointwise fusion and on
    CUDA graphs in decode."""
    verdicts = []
    for row in _claim_rows(MAIN.read_text()):
        cell = row.rsplit("&", 1)[1].strip()
        match = re.fullmatch(r"\\([A-Za-z]+Verdict)\\reprostatus\{\\Repro([A-Za-z]+)\}\\modelstatus\{\\Models([A-Za-z]+)\}",
                             cell)
        assert match and match.group(1) == match.group(2) == match.group(3), \
            f"verdict cell {cell!r}: not a verdict with its status"
        verdicts.append(match.group(1))
    claims = [name for study in STUDIES for name in importlib.import_module(f"kernels.{study}.report").CLAIMS]
    assert sorted(verdicts) == sorted(claims)
    assert {"SwigluClaimFusionVerdict", "SwigluClaimGraphVerdict"} <= set(verdicts)


def test_a_tie_word_stands_beside_its_ratio_and_interval():
    """A ratio worded by the report (``...Tie``: faster, slower or a tie, from its interval) is quoted in
    the same sentence with its interval, and the text words no such ratio itself."""
    tex = MAIN.read_text()
    words = set(re.findall(r"\\([A-Za-z]+)Tie\b", tex))
    assert words, "no ratio worded from its interval in paper/main.tex"
    for name in words:
        for m in re.finditer(rf"\\{name}Tie\b", tex):
            sentence = tex[m.start():tex.find(".", m.end())]
            assert f"\\{name}$\\times$" in sentence and f"\\{name}Ci" in sentence, f"{name}: {sentence!r}"
        for m in re.finditer(rf"\\{name}\$\\times\$", tex):
            around = tex[max(0, m.start() - 80):m.end() + 80]
            assert not re.search(r"\b(faster|slower)\b", around), f"{name} worded by hand: {around!r}"


def _claims_table(tex: str) -> str:
    """The source of the claims table in ``tex``, from its label to its end."""
    claims = tex[tex.index("\\label{tab:claims}"):]
    return claims[:claims.index("\\end{table}")]


def _without_interval(tex: str, name: str, unit: str, sep: str = r"\s*") -> list[str]:
    """The macros of ``tex`` whose name matches the regex ``name``, printed with ``unit`` (a regex)
    and then ``sep``, that their interval (the same name with ``Ci``,
    :func:`kernels.paper.report_kit.interval`) does not follow."""
    found = re.finditer(rf"\\({name}){unit}{sep}(\\[A-Za-z]+)?", tex)
    return [m.group(1) for m in found if m.group(2) != f"\\{m.group(1)}Ci"]


def _ratios_without_interval(tex: str) -> list[str]:
    """The ratio macros of ``tex`` (a macro followed by ``$\\times$``) without their interval
    (:func:`_without_interval`); the published numbers that the text sets beside ours
    (``...Theirs``) have none."""
    missing = _without_interval(tex, "[A-Za-z]+", r"\$\\times\$", r"(?:~|\s*)")
    return [name for name in missing if not name.endswith("Theirs")]


def test_every_ratio_of_the_abstract_and_the_claims_table_carries_its_interval():
    tex = MAIN.read_text()
    abstract = tex[tex.index("\\begin{abstract}"):tex.index("\\end{abstract}")]
    claims = _claims_table(tex)
    for part, name in ((abstract, "the abstract"), (claims, "the claims table")):
        assert "$\\times$" in part
        missing = _ratios_without_interval(part)
        assert not missing, f"ratios without an interval in {name}: {missing}"
    assert _ratios_without_interval("\\FooSpeedup$\\times$ (B4)") == ["FooSpeedup"]
    assert not _ratios_without_interval("\\FooSpeedup$\\times$~\\FooSpeedupCi{} (B4)")


def _bandwidth_shares_without_interval(tex: str) -> list[str]:
    """The bandwidth shares of ``tex`` (a macro of a share of the datasheet's or the copy's bandwidth,
    ``...PctPeak...`` or ``...PctCopy...``, followed by ``\\,\\%``) without their interval
    (:func:`_without_interval`)."""
    return _without_interval(tex, r"[A-Za-z]*Pct(?:Peak|Copy)[A-Za-z]*", r"\\,\\%")


def test_the_bandwidth_shares_of_the_claims_table_and_the_swiglu_section_carry_their_intervals():
    tex = MAIN.read_text()
    claims = _claims_table(tex)
    swiglu = tex[tex.index("\\label{sec:swiglu}"):tex.index("\\label{sec:flex}")]
    for part, name in ((claims, "the claims table"), (swiglu, "the SwiGLU section")):
        assert "Pct" in part
        missing = _bandwidth_shares_without_interval(part)
        assert not missing, f"bandwidth shares without an interval in {name}: {missing}"
    assert _bandwidth_shares_without_interval("\\FooPctPeakRange\\,\\% of it") == ["FooPctPeakRange"]
    assert not _bandwidth_shares_without_interval("\\FooPctCopyRange\\,\\% \\FooPctCopyRangeCi{} of it")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The committed data rendered to the paper in a copy of the tracked files (this tree is left alone)."""
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True,
                           check=True).stdout.split("\0")
    tree = tmp_path_factory.mktemp("paper") / "tree"
    for name in filter(None, files):
        if (ROOT / name).is_file():
            (tree / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, tree / name)
    proc = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "2", "--config", "measure=false"],
                          cwd=tree, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    return tree


needs_tex = pytest.mark.skipif(not shutil.which("latexmk") or not shutil.which("pdftotext"),
                               reason="needs TeX and poppler")


@pytest.mark.slow
@needs_tex
def test_the_built_paper_has_no_undefined_reference_or_wide_box(built):
    from kernels.paper.latex import paper_problems

    numbers = (built / "paper" / "generated" / "numbers.tex").read_text()
    assert "\\GdnChunkMsBFourTEightK}{n/a}" not in numbers and "\\SwigluCopyTBps}{n/a}" not in numbers
    log = (built / "paper" / "main.log").read_text(errors="replace")
    assert paper_problems(log) == []
    floats = "".join((built / "paper" / "generated" / f"{s}_floats.tex").read_text() for s in STUDIES)
    labels = set(re.findall(r"\\label\{((?:fig|tab):[^}]*)\}", floats))
    assert labels == set(_floats()) and labels <= _cited(MAIN.read_text())


@pytest.mark.slow
@needs_tex
def test_the_built_paper_embeds_its_fonts_and_has_the_stated_pages(built):
    pdf = built / "paper" / "main.pdf"
    fonts = subprocess.run(["pdffonts", str(pdf)], capture_output=True, text=True, check=True).stdout
    rows = fonts.splitlines()[2:]
    assert rows and all(line.split()[-5] == "yes" for line in rows), fonts
    info = subprocess.run(["pdfinfo", str(pdf)], capture_output=True, text=True, check=True).stdout
    pages = int(re.search(r"Pages:\s+(\d+)", info).group(1))
    stated = re.search(r"`paper/main\.pdf` \((\d+) pages\)", (ROOT / "README.md").read_text())
    assert stated and int(stated.group(1)) == pages, f"the PDF has {pages} pages; README.md says otherwise"


@pytest.mark.slow
@needs_tex
def test_commands_copied_from_the_pdf_keep_their_double_dashes(built):
    """The one option the paper names (Method: a reader's own run is a reproduction) copies with its double
    dash; the appendix names no command, option or config key (the README gives them)."""
    text = subprocess.run(["pdftotext", str(built / "paper" / "main.pdf"), "-"], capture_output=True,
                          text=True, check=True).stdout
    text = " ".join(text.split())  # a command the line breaks is copied with a space there
    assert "--profile profiles/quick" in text
    appendix = text[text.index("Artifact, runs and reproduction"):]
    for word in ("snakemake --", "--config", "--resources", "--workflow-profile", "profiles/", "config reproduce",
                 "compile_ahead", "reproduce.committed", "HEADLINES"):
        assert word not in appendix, f"{word!r} in the appendix's text"


@pytest.mark.slow
@needs_tex
def test_the_appendix_follows_the_committed_second_run(built):
    """Where config reproduce.committed names a second run of data/raw/h200/, rendering compares it
    and the appendix states the result; where it names none, the appendix says that none is."""
    second = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())["reproduce"]["committed"].get("h200")
    numbers = (built / "paper" / "generated" / "reproduction_numbers.tex").read_text()
    if second is None:
        assert "\\newif\\ifReproRun  % false: no second run" in numbers and "\\ReproRuntrue" not in numbers
        assert not (built / "results" / "reproduction.txt").exists()
        assert "No second run of these measurements is committed." in (
            built / "paper" / "generated" / "reproduction.tex").read_text()
        return
    summary = (built / "results" / "reproduction.txt").read_text()
    assert summary.startswith(("reproduced: ", "NOT reproduced: "))
    folders = [second] if isinstance(second, str) else second
    assert "\\newcommand{\\ReproCandidate}{" + reproduce_report.folders_latex(sorted(folders)) + "}" in numbers
    assert "\\ReproRuntrue" in numbers


@pytest.mark.slow
@needs_tex
def test_every_committed_run_is_listed_in_the_table_of_runs(built):
    """Each study folder of each data/raw/<model>/ and of each data/reproductions/<name>/ is a run of
    results/runs.csv and of Table tab:runs, which the appendix places and cites."""
    import pandas as pd

    table = pd.read_csv(built / "results" / "runs.csv")
    listed = set(zip(table["folder"].map(lambda f: str(Path(f))), table["study"]))
    folders = {(str(p.parent.parent.relative_to(ROOT)), p.parent.name)
               for base in ("raw", "reproductions") for p in (ROOT / "data" / base).glob("*/*/*.jsonl")}
    assert folders and folders <= listed, f"not in results/runs.csv: {sorted(folders - listed)}"
    tex = (built / "paper" / "generated" / "runs.tex").read_text()
    gpus = {gpu.removeprefix("GPU-") for gpu in table["gpu"]}  # the table names each run by its GPU
    assert gpus and all(f" {gpu} &" in tex for gpu in gpus), [gpu for gpu in gpus if f" {gpu} &" not in tex]
    assert "\\RunsTable" in MAIN.read_text() and "tab:runs" in _cited(MAIN.read_text())
    assert "Every measuring run in" in subprocess.run(["pdftotext", str(built / "paper" / "main.pdf"), "-"],
                                                      capture_output=True, text=True, check=True).stdout


@pytest.mark.slow
@needs_tex
def test_no_ratio_whose_interval_holds_one_is_called_faster_or_slower(built):
    """Where the text words a ratio by hand (``faster``/``slower`` within the clause after
    ``\\<ratio>$\\times$``), its interval as rendered (``\\<ratio>Ci``) does not hold 1.0."""
    numbers = (built / "paper" / "generated" / "numbers.tex").read_text()
    values = dict(re.findall(r"\\newcommand\{\\([A-Za-z]+)\}\{(.*)\}$", numbers, flags=re.MULTILINE))
    tex = re.sub(r"(?<!\\)%.*", "", MAIN.read_text())
    worded = [m.group(1) for m in re.finditer(r"\\([A-Za-z]+)\$\\times\$([^.;:,)]*)", tex)
              if re.search(r"\b(faster|slower)\b", m.group(2))]
    assert worded, "no ratio worded faster or slower in paper/main.tex"
    ties = [name for name in worded if "tie" in values.get(name + "Ci", "")]
    assert not ties, f"called faster or slower with an interval that holds 1: {ties}"


#: Gaps between text lines up to this many PDF points count as filled (:func:`_page_fullness`).
BRIDGE_PT = 30.0


def _page_fullness(pdf: Path) -> list[tuple[float, list[str]]]:
    """Per page of ``pdf``: the fraction of its text area (the page less paper/main.tex's geometry
    margin on each side) that holds something, and its lines of text.

    The measure: the union of the vertical extents of the page's text lines (``pdftotext
    -bbox-layout``), each gap of up to :data:`BRIDGE_PT` between them counted as filled (the space
    between lines, paragraphs, a float and its caption). A figure's text (title, tick and axis labels,
    legend; its fonts are embedded as text) spans the figure, so a figure counts at its height; the
    page number below the text area is left out. Blank space above, between and below floats of a
    float page counts as empty, as it looks.
    """
    margin_cm = float(re.search(r"margin=([\d.]+)cm", MAIN.read_text()).group(1))
    margin = margin_cm / 2.54 * 72  # PDF points
    xml = subprocess.run(["pdftotext", "-bbox-layout", str(pdf), "-"], capture_output=True, text=True,
                         check=True).stdout
    pages = []
    for page in re.findall(r"<page [^>]*>.*?</page>", xml, flags=re.DOTALL):
        top, bottom = margin, float(re.search(r'height="([\d.]+)"', page).group(1)) - margin
        lines = re.findall(r'<line xMin="[\d.]+" yMin="([\d.]+)" xMax="[\d.]+" yMax="([\d.]+)">(.*?)</line>',
                           page, flags=re.DOTALL)
        spans = sorted((max(float(y0), top), min(float(y1), bottom)) for y0, y1, _ in lines if float(y0) < bottom)
        filled, start, end = 0.0, None, None
        for y0, y1 in spans:
            if end is not None and y0 - end <= BRIDGE_PT:
                end = max(end, y1)
                continue
            filled += 0.0 if end is None else end - start
            start, end = y0, y1
        filled += 0.0 if end is None else end - start
        texts = [" ".join(re.findall(r">([^<]*)</word>", words)) for _, _, words in lines]
        pages.append((filled / (bottom - top), texts))
    return pages


@pytest.mark.slow
@needs_tex
def test_no_page_before_the_references_is_under_a_third_full(built):
    """A page less than a third full (by :func:`_page_fullness`) is a float page of one small float or
    a section cut short by floats; the references and the last page may end short."""
    pages = _page_fullness(built / "paper" / "main.pdf")
    refs = next((i for i, (_, lines) in enumerate(pages) if "References" in lines), len(pages))
    thin = [(i + 1, round(full, 2)) for i, (full, _) in enumerate(pages[:min(refs, len(pages) - 1)])
            if full < 1 / 3]
    assert not thin, f"pages under a third full (page, fraction of the text area): {thin}"


@pytest.mark.slow
@needs_tex
def test_every_figure_of_a_measured_study_draws_data_in_each_panel(built):
    """A figure of a study with rows draws data on each of its panels (``has_data``: a line, bars,
    markers); only a study without rows may get panels that say "not measured"."""
    from kernels.paper.render import read_tidy, report_module

    for study in STUDIES:
        df = read_tidy(built / "results" / "tidy" / f"{study}.csv")
        if df.empty:
            continue
        for name, draw in report_module(study).FIGURES.items():
            fig = draw(df)
            empty = [ax.get_title() or f"panel {i + 1}" for i, ax in enumerate(fig.axes)
                     if ax.get_visible() and not ax.has_data()]
            plt.close(fig)
            assert not empty, f"{name} of {study} (which has rows) draws nothing on: {empty}"


def _pdf_pages(pdf: Path) -> list[str]:
    """The text of each page of ``pdf`` (pdftotext, reading order)."""
    return subprocess.run(["pdftotext", str(pdf), "-"], capture_output=True, text=True,
                          check=True).stdout.split("\f")


@pytest.mark.slow
@needs_tex
def test_the_body_fills_at_most_14_pages_and_the_abstract_150_to_200_words(built):
    """The body (every page before the references begin; the appendix follows them, from a new page)
    fits 14 pages, and the abstract, as printed, has 150 to 200 words."""
    pages = _pdf_pages(built / "paper" / "main.pdf")
    starts = [i + 1 for i, page in enumerate(pages) if re.search(r"^References\s*$", page, re.M)]
    assert starts, "the references' heading is on no page"
    assert starts[0] <= 14, f"the references begin on page {starts[0]}: the body fills more than 14 pages"
    first = re.search(r"\\appendix\s*\\section\{([^}]*)\}", MAIN.read_text()).group(1)
    heading = re.compile(r"^(A\s+)?" + re.escape(first).replace(r"\ ", r"\s+") + r"\s*$", re.M)  # "A" may stand apart
    appendix = [i + 1 for i, page in enumerate(pages) if heading.search(page)]
    assert appendix and appendix[0] > starts[0], "the appendix does not follow the references"
    assert not re.search(r"^References\s*$", pages[appendix[0] - 1], re.M), "the appendix shares a page with the references"
    text = "\n".join(pages)
    abstract = text[text.index("Abstract") + len("Abstract"):re.search(r"^1\s+Introduction", text, re.M).start()]
    words = len(abstract.split())
    assert 150 <= words <= 200, f"the abstract has {words} words"
