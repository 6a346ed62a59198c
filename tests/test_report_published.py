"""Published numbers beside ours (issue 26.6): a redrawn paper figure draws, marked published,
the numbers the paper states for the cells it shows, with the page or figure they stand on
(report/published.yaml), and its caption says so; a figure whose paper states no number says
that instead. The input is a small hand-built statistics table in tian2020's setting
(ResNet18 at batch 64) and patel2023's (the CPU)."""

from __future__ import annotations

import pandas as pd

from fwbench.analysis.claims import load_claims, published
from fwbench.report.inputs import Inputs, normalize_axes
from fwbench.report.sections import reproduction


def _comparison(model, phase, batch, ratio, device="cpu"):
    return {"pair_id": f"{model}-{phase}-{batch}", "experiment": "throughput", "device": device,
            "model": model, "phase": phase, "batch_size": batch, "input_shape": "3x32x32",
            "precision": "fp32", "mode": "idiomatic", "profile": "defaults",
            "optimizer": "none", "ratio": ratio, "ratio_ci_low": ratio * 0.95,
            "ratio_ci_high": ratio * 1.05, "verdict": "pytorch_faster", "exploratory": False,
            "rope_low": 1 / 1.05, "rope_high": 1.05}


def _inputs(rows) -> Inputs:
    empty = pd.DataFrame()
    return Inputs(trials=empty, cells=empty, cell_stats=empty,
                  comparisons=normalize_axes(pd.DataFrame(rows)), tests=empty)


def test_every_published_value_names_its_claim_paper_and_where_it_stands():
    claims = {c["id"]: c for c in load_claims()["claims"]}
    for value in published.load_published():
        assert claims[value["claim"]]["paper"] == value["paper"]
        assert value["where"].strip() and isinstance(value["figure"], int)
    assert claims["tian2020-resnet18-train"]["published_ratio"] == [0.82, 0.847]
    assert published.text(published.for_claim("tian2020-resnet18-adam-accuracy")[0]) == "83.1 %"


def test_a_redrawn_figure_draws_the_published_ratio_beside_the_measured_one(tmp_path):
    data = _inputs([_comparison("resnet18", "train", 64, 0.9),
                    _comparison("resnet18", "infer", 64, 0.7),
                    _comparison("resnet18", "train", 4, 0.8)])   # not the paper's cell
    figures = reproduction.figures(data, tmp_path, {})
    tian = figures["tian_relative"]
    assert tian.file and tian.source == "tian2020 Figures 2–3 and 6–7"
    assert "marked published" in tian.caption
    assert "0.820–0.847 (Sec. 4.1, p. 6, Figure 2)" in tian.caption
    assert "0.413–0.630 (Sec. 4.1, p. 6, Figure 3)" in tian.caption
    svg = (tmp_path / tian.file).read_text()
    assert svg.count("<path") > 0
    assert "2 pairs" in tian.caption          # only the paper's cells: batch 64
    # patel2023 states no number for its Fig. 3: said, nothing drawn
    patel = figures["patel_fig3"]
    assert patel.file and "states no number for this figure" in patel.caption
    assert "marked published" not in patel.caption


def test_numbers_for_cells_a_figure_does_not_show_are_named_not_drawn(tmp_path):
    data = _inputs([_comparison("resnet18", "train", 64, 0.9)])
    tian = reproduction.figures(data, tmp_path, {})["tian_relative"]
    assert "0.820–0.847" in tian.caption and "0.413–0.630" not in tian.caption
    none = reproduction.figures(_inputs([_comparison("resnet18", "train", 4, 0.9)]), tmp_path,
                                {})["tian_relative"]
    assert none.file is None and "ResNet18 at batch 64" in none.reason


def test_the_claims_table_quotes_each_published_number_with_its_source():
    claims = load_claims()
    by_id = {c["id"]: c for c in claims["claims"]}
    [ratio] = reproduction.published_values(by_id["tian2020-resnet18-train"], claims["papers"])
    assert ratio == {"text": "time ratio 0.820–0.847",
                     "source": "Tian 2020, Sec. 4.1, p. 6, Figure 2"}
    [p] = reproduction.published_values(by_id["florencio2019-train-time"], claims["papers"])
    assert p["text"].endswith("3.9 × 10⁻¹⁸") and "Fig. 4" in p["source"]
    assert reproduction.published_values(by_id["patel2023-no-clear-winner"],
                                         claims["papers"]) == []


def test_the_accuracy_curves_draw_the_published_accuracy_of_the_line_it_belongs_to(tmp_path):
    from fwbench.report.figures import convergence

    rows = [{"experiment": "convergence", "device": "cpu", "model": "resnet18",
             "batch_size": 64, "input_shape": "3x32x32", "precision": "fp32",
             "mode": "idiomatic", "profile": "defaults", "optimizer": optimizer,
             "framework": framework, "trial": 1, "epoch": epoch, "val_accuracy": 0.5 + 0.05 * epoch}
            for framework in ("pytorch", "tensorflow") for optimizer in ("adam", "sgd")
            for epoch in range(1, 5)]
    figure = convergence.accuracy_curves(
        pd.DataFrame(rows), tmp_path, key="acc", title="Validation accuracy per epoch",
        paper="Tian 2020", published=published.for_figure("tian2020", [1, 5, 9], "accuracy"))
    assert "ResNet18 best validation accuracy, PyTorch with Adam (CIFAR-10): 83.1 % " \
           "(Sec. 4.1, p. 6, Figure 1)" in figure.caption
    assert "model.fit" not in figure.caption     # no keras line in this run: not named


def _convergence_trials(model="resnet18", batch=64):
    """Three trials a framework of one convergence cell: TensorFlow's epochs 30 % slower, its
    first epoch 3 s above its later ones, PyTorch's 1 s."""
    return pd.DataFrame([
        {"experiment": "convergence", "device": "cpu", "model": model, "phase": "train",
         "batch_size": batch, "input_shape": "1x28x28", "precision": "fp32",
         "mode": "idiomatic", "profile": "defaults", "optimizer": "adam",
         "framework": framework, "trial": trial, "status": "ok",
         "median_ns": slow * 2e9 + trial * 1e6, "inference_median_ns": slow * 2e8,
         "cold_start_ns": slow * 2e9 + excess + trial * 1e6}
        for framework, slow, excess in (("pytorch", 1.0, 1e9), ("tensorflow", 1.3, 3e9))
        for trial in (1, 2, 3)])


def test_the_epoch_times_draw_the_published_first_epoch_ratio_and_seconds(tmp_path):
    from fwbench.report.figures import convergence
    from fwbench.report.sections.accuracy import epoch_time_summary

    figure = convergence.epoch_times(
        epoch_time_summary(_convergence_trials()), tmp_path, key="times", title="Times",
        paper="Tian 2020",
        published=published.for_figure("tian2020", reproduction.TIAN_TIME_FIGURES))
    svg = (tmp_path / figure.file).read_text()
    # the first epoch's ratio above its bars, ours (3.003 s / 5.603 s) beside the paper's
    assert "ours 0.536" in svg and "published 0.815–0.844" in svg
    assert "published 0.820–0.847" in svg      # training per epoch (Figure 2)
    assert "published 0.413–0.630" in svg      # inference (Figure 3)
    assert "ResNet18 first-epoch time, PyTorch 18.5 % faster: 0.815–0.844 (Sec. 4.1, p. 6, " \
           "Figure 4)" in figure.caption
    assert "ResNet18 first epoch above TensorFlow's average epoch: 8.68 s (Sec. 4.1, p. 6, " \
           "Figure 4)" in figure.caption
    assert "ResNet18 first epoch above PyTorch's average epoch: 2.60 s" in figure.caption
    assert "VGG16" not in figure.caption       # stated for cells this run did not measure
    assert "first epoch above the median epoch" in figure.caption


def test_epoch_times_of_other_cells_name_the_published_values_without_drawing_them(tmp_path):
    from fwbench.report.figures import convergence
    from fwbench.report.sections.accuracy import epoch_time_summary

    figure = convergence.epoch_times(
        epoch_time_summary(_convergence_trials(batch=32)), tmp_path, key="times",
        title="Times", paper="Tian 2020",
        published=published.for_figure("tian2020", reproduction.TIAN_TIME_FIGURES))
    assert "states numbers for cells this figure does not show" in figure.caption
    assert "published" not in (tmp_path / figure.file).read_text()
