"""Section 4, Reproduction of the source papers: every published claim with its verdict
(fwbench.analysis.claims judges them; this section renders them), and each paper's figures
rebuilt from this run, or left out with the reason."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from fwbench.analysis.claims import (
    PAPERS,
    VERDICTS,
    evaluate_claim,
    load_claims,
    published,
    wording,
)
from fwbench.analysis.claims.florencio import TELEMETRY_LABELS, paired_tests, telemetry_absent
from fwbench.analysis.claims.real_data import no_real_data
from fwbench.analysis.claims.setting import ANOTHER_SETTING, VALUE_NAMES, with_dataset
from fwbench.report.figures import convergence, papers, speed, style
from fwbench.report.figures.style import Figure
from fwbench.report.formatting import span
from fwbench.report.inputs import Inputs
from fwbench.report.sections import Section, machine
from fwbench.report.sections.accuracy import data_sources, epoch_time_summary, of_ok_trials
from fwbench.report.sections.preliminary import is_preliminary
from fwbench.report.sections.unmeasured import for_readers
from fwbench.report.tables import Numbering


def context(numbering: Numbering, data: Inputs, drawn: dict) -> dict:
    """The claims table with each verdict, and per paper its figures and those left out."""
    return {**claims_section(numbering, data), "paper_figures": PAPER_FIGURES,
            "paper_order": PAPERS}


def figures(data: Inputs, folder: Path, failures: dict) -> dict[str, Figure]:
    """The papers' figures rebuilt from this run, in document order."""
    return {**_patel_figures(data, folder, failures), **_florencio_figures(data, folder),
            **_tian_figures(data, folder)}


UNJUDGED = ("not measured", "untestable")


def claims_section(numbering: Numbering, data: Inputs) -> dict:
    """The claims this run judged (in the paper's setting or another), in one table; those it
    could not judge grouped by reason in a second; every claim in the data appendix; the
    context (beliefs and explanations, neither judged nor counted) listed apart."""
    catalog = load_claims()
    rows, per_paper, counts = [], {}, {v: 0 for v in VERDICTS}
    hints = {v: 0 for v in VERDICTS}
    for claim in catalog["claims"]:
        result = evaluate_claim(claim, data.comparisons, data.cell_stats, data.tests,
                                data.trials, data.scaling, data.strategies, data.statistics)
        counts[result["verdict"]] += 1
        hints[result["verdict"]] += bool(result["exploratory"])
        row = {**claim, **result, "verdict_class": result["verdict"].replace(" ", "-"),
               "published_values": published_values(claim, catalog["papers"]),
               "differences": " ".join([*result["notes"], claim["differences"]]).strip()}
        rows.append(row)
        per_verdict = per_paper.setdefault(claim["paper"], {v: [0, 0] for v in VERDICTS})
        per_verdict[result["verdict"]][0] += 1
        per_verdict[result["verdict"]][1] += bool(result["exploratory"])
    judged = [r for r in rows if r["verdict"] not in UNJUDGED]
    table = {"key": "claims", "number": numbering.next("table") if judged else None,
             "caption": ("The claims this run could judge: the paper's words and where they "
                         "stand, what was published, what this run measured and the status. A "
                         "claim is confirmed or contradicted only where the run measured the "
                         "paper's setting; otherwise it was measured in another setting, and "
                         "the row says what differs. A status marked exploratory rests on "
                         "comparisons or trials too few, unsteady or drifting to confirm "
                         "anything. " + machine.holds_for(data.trials, "Every status holds")
                         ).rstrip()}
    unjudged = _unjudged_groups([r for r in rows if r["verdict"] in UNJUDGED])
    unjudged_table = {"rows": unjudged, "number": numbering.next("table") if unjudged else None,
                      "caption": "The claims this run could not judge, grouped by the reason. "
                                 "Each claim's words, published value and test are in the data "
                                 "appendix Every published claim."}
    preliminary = is_preliminary(data)
    per_paper = {paper: (f"{sum(n for n, _ in per_verdict.values())}, not tallied: this run is "
                         "preliminary" if preliminary else
                         ", ".join(tally(v, n, hint) for v, (n, hint) in per_verdict.items() if n))
                 for paper, per_verdict in per_paper.items()}
    n_unjudged = sum(len(g["ids"]) for g in unjudged)
    sentence = (f"Of the {len(rows)} published claims, {n_unjudged} could not be judged from "
                f"this run (Table {unjudged_table['number']} gives why)." if n_unjudged else "")
    discussion = {paper: _discussion([r for r in rows if r["paper"] == paper], preliminary)
                  for paper in per_paper}
    return {"table": table, "rows": rows, "judged": judged, "counts": counts,
            "exploratory": hints, "papers": catalog["papers"], "per_paper": per_paper,
            "discussion": discussion,
            "unjudged_table": unjudged_table, "unjudged_sentence": sentence,
            "preliminary": preliminary, "context": [context_row(c) for c in catalog["context"]]}


def _discussion(rows: list[dict], preliminary: bool) -> str:
    """A paper's claims as this run read them (the claims table's statuses): where it agrees,
    where not, and what differs where it measured another setting."""
    def ids(verdict: str) -> list[str]:
        return [r["id"] for r in rows if r["verdict"] == verdict]

    agrees, disagrees, elsewhere = ids("confirmed"), ids("contradicted"), ids(ANOTHER_SETTING)
    undecided = [r["id"] for r in rows if r["verdict"] in ("equivalent", "inconclusive")]
    if not (agrees or disagrees or elsewhere or undecided):
        return "This run measured none of its claims' settings."
    out = []
    if agrees:
        out.append(f"The run agrees with {wording.join(agrees)}")
    if disagrees:
        out.append(f"it disagrees with {wording.join(disagrees)}")
    if undecided:
        out.append(f"it could not decide {wording.join(undecided)}")
    text = ("; ".join(out) + ". ") if out else ""
    if text:
        text = text[0].upper() + text[1:]
    if elsewhere:
        differs = dict.fromkeys(d.split(" ")[0] for r in rows if r["verdict"] == ANOTHER_SETTING
                                for d in r.get("differs", []))
        one = len(elsewhere) == 1
        verb = ("was", "neither confirms nor contradicts") if one else \
            ("were", "neither confirm nor contradict")
        text += (f"{wording.count(len(elsewhere), 'claim')} {verb[0]} measured in another "
                 f"setting ({wording.join(elsewhere)}), so {'it' if one else 'they'} {verb[1]} "
                 f"the paper: the {wording.join(differs) or 'setting'} differ from the "
                 "paper's. ")
    if preliminary:
        text += "The run is preliminary, so none of this counts as a finding."
    return text.strip()


def context_row(entry: dict) -> dict:
    """A belief or explanation as the data appendix lists it: status context, no verdict."""
    return {**entry, "verdict": "context", "ours": entry["how"], "exploratory": "",
            "differs": [], "verdict_here": ""}


def published_values(claim: dict, papers: dict) -> list[dict]:
    """The numbers a paper states for a claim (a time ratio as the range its words allow),
    each with where it stands (report/published.yaml)."""
    return [{"text": ("time ratio " if v["quantity"] == "ratio" else f"{v['what']}: ")
             + published.text(v), "source": published.source(v, papers)}
            for v in claim.get("published_values", [])]


def _unjudged_groups(rows: list[dict]) -> list[dict]:
    """Claims not judged, grouped by status and reason (said once per group)."""
    groups: dict[tuple[str, str], list[str]] = {}
    for row in rows:
        reason = for_readers(row["ours"].removeprefix("not measured in this run: ")
                             .removeprefix("untestable: "))
        groups.setdefault((row["verdict"], reason), []).append(row["id"])
    return [{"verdict": verdict, "verdict_class": verdict.replace(" ", "-"), "reason": reason,
             "ids": ids} for (verdict, reason), ids in groups.items()]


def tally(verdict: str, n: int, exploratory: int) -> str:
    if not exploratory:
        return f"{n} {verdict}"
    return f"{n} {verdict} ({'all' if exploratory == n else exploratory} exploratory)"


# The figures each paper section shows, in order (patel2023 Fig. 4 is the results' figure).
PAPER_FIGURES = {
    "patel2023": ["patel_fig1", "patel_fig2", "patel_fig3", "patel_fig5"],
    "dai2022": [],
    "florencio2019": [f"florencio_fig{n}" for n in range(4, 14)],
    "tian2020": ["tian_relative", "tian_times", "tian_accuracy", "tian_confusion"],
    "sumanjali2024": [],
}


def _published(paper: str, figures: list[int], quantity: str | None = None) -> dict:
    """What a redrawn figure draws beside ours: the paper's short name and the numbers (of
    ``quantity``, or all) it states with ``figures`` (report/published.yaml)."""
    return {"paper": load_claims()["papers"][paper]["short"],
            "published": published.for_figure(paper, figures, quantity)}


def _preferred(trials: pd.DataFrame, select: dict) -> pd.DataFrame:
    """The selected trials on one device, mode and profile: the paper's when the run has them.

    The papers ran on a GPU, each framework with its defaults and idiomatic mode.
    """
    frame = style.select_rows(trials, select)
    for axis, wanted in (("device", "cuda"), ("mode", "idiomatic"), ("profile", "defaults")):
        if axis in frame and not frame.empty:
            values = wording.unique(frame, axis)
            keep = wanted if wanted in values else values[0]
            frame = frame[frame[axis].astype(str) == keep]
    return frame


def _patel_figures(data: Inputs, folder: Path, failures: dict) -> dict[str, Figure]:
    comparisons, trials = data.comparisons, data.trials
    devices = wording.join(f"the {VALUE_NAMES.get(d, d)}" for d in
                           wording.unique(trials, "device")) or "no device"

    def relative(number: int, phase: str, device: str, title: str) -> Figure:
        where = "a GPU" if device == "cuda" else "the CPU"
        return speed.relative_time(
            with_dataset(comparisons, trials), failures, folder, key=f"patel2023_fig{number}",
            title=title,
            source=f"patel2023 Fig. {number}", select={"phase": phase, "device": device},
            absent=f"this run has no {phase} pair on {where} (it measured on {devices})",
            **_published("patel2023", [number], "ratio"))

    infer = _preferred(trials, {"phase": "infer"})
    power = "power_w_mean"
    return {
        "patel_fig1": relative(1, "train", "cuda", "Relative training time on the GPU"),
        "patel_fig2": relative(2, "infer", "cuda", "Relative inference time on the GPU"),
        "patel_fig3": relative(3, "infer", "cpu", "Relative inference time on the CPU"),
        "patel_fig5": papers.metric_vs_batch(
            infer, folder, key="patel2023_fig5", title="GPU power against batch size",
            column=power, label=TELEMETRY_LABELS[power], select={}, source="patel2023 Fig. 5",
            absent=("this run has no inference trial" if infer.empty else
                    telemetry_absent(infer, power) if power not in infer or
                    infer[power].notna().sum() == 0 else
                    "it needs inference trials at two batch sizes or more with a power value")),
    }


def _florencio_figures(data: Inputs, folder: Path) -> dict[str, Figure]:
    lenet = _preferred(data.trials, {"model": "lenet5", "batch_size": "100"})
    absent = ("this run has no LeNet-5 cell at batch 100 (presets/florencio2019.yaml "
              "measures them: 600 steps of batch 100 per trial, 100 trials)")
    epoch = "epoch" in wording.unique(lenet, "experiment")
    if epoch:  # the paper's own measurement, where the run has it
        lenet = lenet[lenet["experiment"].astype(str) == "epoch"]
    panels = ([(4, "train", "median_ns", "LeNet-5 training time per epoch"),
               (5, "train", "inference_median_ns", "LeNet-5 inference time on the test set")]
              if epoch else [(4, "train", "median_ns", "LeNet-5 training step time"),
                             (5, "infer", "median_ns", "LeNet-5 inference batch time")])
    for first, column, what in ((6, "gpu_temp_c_max", "GPU temperature"),
                                (8, "cpu_temp_c_max", "CPU temperature"),
                                (10, "gpu_util_mean", "GPU utilization"),
                                (12, "cpu_util_mean", "CPU utilization")):
        panels += [(first, "train", column, f"{what} while training LeNet-5"),
                   (first + 1, "infer", column, f"{what} during LeNet-5 inference")]
    out = {}
    for number, phase, column, title in panels:
        telemetry = column not in TIMES
        reason = absent
        if telemetry and not lenet.empty:
            reason = telemetry_absent(lenet, column)
        note = (_time_note(column, epoch, data.trials) if not telemetry else
                "The paper sampled averages during the phase; we show the trial's "
                + TELEMETRY_LABELS[column] + " over its timed iterations.")
        out[f"florencio_fig{number}"] = papers.trial_boxplots(
            with_dataset(lenet), folder, key=f"florencio2019_fig{number}", title=title,
            select={"phase": phase}, source=f"florencio2019 Fig. {number}", absent=reason,
            note=note, column=column, label=TELEMETRY_LABELS.get(column),
            phase="infer" if column == "inference_median_ns" else phase,
            ours=paired_tests(data.tests, phase, "time" if column == "median_ns" else column),
            **_published("florencio2019", [number], "p"))
    return out


# florencio2019's two times per trial (Figs. 4 and 5): the training run's and the inference's.
TIMES = ("median_ns", "inference_median_ns")


def _time_note(column: str, epoch: bool, trials: pd.DataFrame) -> str:
    """What a time box plot's value is, against the paper's whole epochs of 600 steps over
    MNIST and its passes over the test set."""
    if not epoch:
        return ("The paper timed whole epochs of 600 steps over MNIST; these are median step "
                "times (600 steps per trial in the preset) on synthetic data of MNIST's shape, "
                "so data loading is left out.")
    what = ("its timed training runs (the first, cold run left out)" if column == "median_ns"
            else "its passes over the test set")
    return (f"Each value is the median of {what}, as the paper timed them, on "
            f"{data_sources(trials)}.")


def _tian_figures(data: Inputs, folder: Path) -> dict[str, Figure]:
    """tian2020's figures, each left out with the reason: its time ratios from the throughput
    experiment's pairs, the rest from the convergence experiment."""
    absent = no_real_data(data.trials)
    summary = epoch_time_summary(data.trials)
    counts = span(summary["n"]) if len(summary) else "no"
    confusion = style.select_rows(of_ok_trials(data.confusion, data.trials),
                                 {"experiment": "convergence"})
    chosen, which = _confusion_cell(confusion)
    return {
        "tian_relative": _tian_relative(data, folder),
        "tian_times": convergence.epoch_times(
            summary, folder, key="tian2020_times", title="Training, inference and first-epoch "
            "times", source="tian2020 Figures 2–4 and 6–8", absent=absent,
            note="Training per epoch: the epochs after the first, validation excluded; "
                 "inference: one pass over the test set (the validations after the first "
                 "epoch); first epoch: its training time, tracing and autotuning included. "
                 f"Trials per bar: {counts}. Data: {data_sources(data.trials)}.",
            **_published("tian2020", TIAN_TIME_FIGURES)),
        "tian_accuracy": convergence.accuracy_curves(
            with_dataset(of_ok_trials(data.epochs, data.trials), data.trials), folder,
            key="tian2020_accuracy",
            title="Validation accuracy per epoch", source="tian2020 Figures 1 and 5",
            absent=absent, **_published("tian2020", [1, 5, 9], "accuracy")),
        "tian_confusion": convergence.confusion_matrices(
            chosen, folder, key="tian2020_confusion", title="Confusion matrix of the last "
            "epoch", which=which, absent=absent),
    }


# tian2020's time figures whose ratios it states (ResNet18 Figures 2-3, VGG16 Figures 6-7), and
# with them those of the first epoch, a ratio and the seconds above the later epochs (4, 8).
TIAN_RATIO_FIGURES = [2, 3, 6, 7]
TIAN_TIME_FIGURES = [2, 3, 4, 6, 7, 8]


def _tian_relative(data: Inputs, folder: Path) -> Figure:
    """tian2020's training and inference times as this run's time ratios, on the pairs of its
    cells (ResNet18 at batch 64, VGG16 at batch 32), its stated ratios beside them."""
    shown = _published("tian2020", TIAN_RATIO_FIGURES, "ratio")
    comparisons = with_dataset(data.comparisons, data.trials)
    keep = [bool(published.of_cells(shown["published"], row))
            for _, row in comparisons.iterrows()]
    return speed.relative_time(
        comparisons[keep] if len(comparisons) else comparisons, {}, folder,
        key="tian2020_ratios", title="Relative training and inference time",
        source="tian2020 Figures 2–3 and 6–7", **shown,
        absent="this run has no pair of the paper's cells (ResNet18 at batch 64, VGG16 at "
               "batch 32; presets/tian2020-cpu.yaml measures ResNet18's)")


def _confusion_cell(confusion: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """One cell pair's matrices, and a sentence naming it: the paper's ResNet18 where the run
    has it, on the device, mode and profile the papers used when present, else the first."""
    if confusion.empty:
        return confusion, ""
    frame = _preferred(confusion, {"model": "resnet18"} if "resnet18" in
                       set(confusion["model"].astype(str)) else {})
    keys = [k for k in wording.TRAINING_AXES if k in frame]
    first = frame.sort_values(keys, kind="stable").iloc[0]
    frame = frame[(frame[keys].astype(str) == first[keys].astype(str)).all(axis=1)]
    cell = wording.setting({k: first[k] for k in keys if not wording.missing(first[k])})
    return frame, (f"the cell ({cell}), after its last validation on the test set, chosen as "
                   "the paper's ResNet18 (else the first cell), with the GPU, idiomatic mode "
                   "and defaults profile where the run has them")


SECTION = Section(
    key="claims", template="reproduction", anchor="reproduction", place="body", order=40,
    title="Reproduction of the source papers", figures=figures,
    context=lambda b: context(b.numbering, b.data, b.figures),
    parts=lambda c: [(f"paper-{p}", c["claims"]["papers"][p]["short"]) for p in PAPERS])
