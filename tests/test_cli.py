"""The `fwbench` command as a user meets it: help, version, names, and errors that name the fix."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import fwbench
from fwbench import cli
from tests.reference_runs import small_run

REPO = Path(__file__).resolve().parent.parent
FWBENCH = [sys.executable, "-m", "fwbench"]
USER_COMMANDS = ("rebuild", "export", "models", "unlock-if-idle", "pin-images")
WORKFLOW_COMMANDS = ("idle", "trial")


def run(*args, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([*FWBENCH, *args], capture_output=True, text=True, **kwargs)


def test_console_script_is_the_same_main_as_python_m_fwbench():
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts == {"fwbench": "fwbench.cli:main"}
    assert "from fwbench.cli import main" in (REPO / "fwbench" / "__main__.py").read_text()
    installed = Path(sys.executable).parent / "fwbench"
    if installed.exists():  # after `pip install -e .` (make re-installs when pyproject changes)
        same = subprocess.run([str(installed), "--help"], capture_output=True, text=True)
        assert same.stdout == run("--help").stdout


def test_help_lists_the_users_commands_and_hides_the_workflows_own():
    proc = run("--help")
    assert proc.returncode == 0
    text = proc.stdout
    assert "snakemake --cores 1" in text and "make run" in text   # how to run the benchmark
    listed = text.split("\ncommands:\n")[1].split("\n\n")[0]
    for name in USER_COMMANDS:
        line = next(line for line in listed.splitlines() if line.startswith(f"  {name} "))
        assert len(line.split()) > 4, line  # a summary beside the name
    for name in WORKFLOW_COMMANDS:   # run by the workflow's rules: neither listed nor in usage
        assert not re.search(rf"^  {name} |[{{,]{name}[,}}]", listed, re.M), name
    for name in USER_COMMANDS + WORKFLOW_COMMANDS:
        sub = run(name, "--help")  # each with a paragraph of its own
        assert sub.returncode == 0 and len(sub.stdout.split("\n\n")[1]) > 80, name
    assert "<command>\n" not in text  # no argparse metavar line in the list


def test_version():
    proc = run("--version")
    assert proc.returncode == 0 and proc.stdout.strip() == f"fwbench {fwbench.__version__}"


def test_no_command_prints_the_help():
    proc = run()
    assert proc.returncode == 2 and "commands:" in proc.stderr


def test_pin_images_is_a_command_as_the_docs_name_it(tmp_path):
    named = (REPO / "fwbench" / "environment" / "images.py").read_text() + (
        REPO / "containers" / "images.lock").read_text()
    assert "python -m fwbench pin-images" in named
    lock = tmp_path / "images.lock"
    lock.write_text((REPO / "containers" / "images.lock").read_text())
    empty = tmp_path / "bin"
    empty.mkdir()
    proc = run("pin-images", "--lock", str(lock), env={**os.environ, "PATH": str(empty)})
    assert proc.returncode == 1
    assert "skopeo, crane or docker" in proc.stderr and "make pin-images" in proc.stderr


def test_a_folder_that_is_no_run_names_the_runs_there(tmp_path):
    (tmp_path / "results" / "mine" / "cells").mkdir(parents=True)
    for command in ("rebuild", "export"):
        proc = run(command, "results/nope", cwd=tmp_path)
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.startswith(f"fwbench {command}: results/nope is not a run folder")
        assert "Runs here: results/mine" in proc.stderr


def test_a_missing_package_names_the_install_command(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "fwbench.plan.models", None)  # as if its imports were missing
    assert cli.main(["models"]) == 2
    err = capsys.readouterr().err
    assert "is not installed here" in err and "make .venv/.installed" in err


def test_a_missing_snakemake_names_the_fix(tmp_path, monkeypatch, capsys):
    run_dir = small_run(tmp_path / "results" / "r")
    monkeypatch.setitem(sys.modules, "snakemake", None)  # as if it were not installed
    assert cli.main(["rebuild", str(run_dir)]) == 2
    err = capsys.readouterr().err
    assert "Snakemake is not installed beside fwbench" in err and "make .venv/.installed" in err


def test_record_refuses_a_machine_whose_pdf_fonts_would_differ(tmp_path, monkeypatch, capsys):
    # HarfBuzz-Subset is a system library; which one WeasyPrint found is faked here
    from fwbench.workflow import manifest

    run_dir = tmp_path / "results" / "r"
    (run_dir / "cells").mkdir(parents=True)
    monkeypatch.setattr(manifest, "subsets_fonts_with_harfbuzz", lambda: False)
    assert cli.main(["rebuild", str(run_dir), "--record"]) == 2
    err = capsys.readouterr().err
    assert "refused to record: this machine lacks HarfBuzz-Subset" in err
    assert "libharfbuzz-subset0" in err and not (run_dir / "rebuild.sha256").exists()


def test_a_run_without_its_saved_config_is_not_rebuilt_from_another(tmp_path, capsys):
    run_dir = tmp_path / "results" / "r"
    (run_dir / "cells").mkdir(parents=True)
    assert cli.main(["rebuild", str(run_dir)]) == 2
    err = capsys.readouterr().err
    assert f"{run_dir / 'config.yaml'} is missing" in err and "copy that config" in err


@pytest.mark.slow
def test_help_and_version_work_with_nothing_but_fwbench_installed(tmp_path):
    """A fresh venv with fwbench alone (no locked deps): the console script's --help and
    --version work, and a command that needs more says how to install it."""
    venv = tmp_path / "v"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next((venv / "lib").glob("python*/site-packages"))
    (site / "fwbench-src.pth").write_text(str(REPO) + "\n")  # what an editable install adds
    python = venv / "bin" / "python"
    main = [str(python), "-c", "import sys; from fwbench.cli import main; sys.exit(main())"]
    assert subprocess.run([*main, "--version"], capture_output=True, text=True,
                          check=True).stdout.strip() == f"fwbench {fwbench.__version__}"
    assert "commands:" in subprocess.run([*main, "--help"], capture_output=True, text=True,
                                         check=True).stdout
    proc = subprocess.run([*main, "models"], capture_output=True, text=True)
    assert proc.returncode == 2 and "make .venv/.installed" in proc.stderr


@pytest.mark.slow
def test_an_installed_wheel_rebuilds_a_copied_run_outside_any_checkout(tmp_path):
    """`pip install .` (a wheel, not editable) into a fresh venv, then `fwbench rebuild` of
    part of the reference run (its lenet5 inference cells at batch 2) copied into a folder of
    its own, with nothing of either environment on PATH: the workflow, templates, claims and
    schemas come from the wheel's package data, Snakemake from the venv. The venv borrows the
    locked dependencies from this test environment (a .pth line) so nothing is downloaded;
    fwbench itself is the wheel, built from a copy of the tree."""
    source = tmp_path / "source"
    shutil.copytree(REPO, source, ignore=shutil.ignore_patterns(
        ".git", ".venv", "results", "logs", "build", "wheelhouse", ".snakemake", "__pycache__",
        "*.egg-info", ".pytest_cache"))
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next((venv / "lib").glob("python*/site-packages"))
    borrowed = [p for p in sys.path if p.endswith("site-packages") and Path(p).is_dir()]
    (site / "locked-dependencies.pth").write_text("".join(f"{p}\n" for p in borrowed))
    subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"),
                    "install", "--quiet", "--no-deps", "--no-build-isolation", str(source)],
                   check=True, cwd=tmp_path)
    shutil.rmtree(source)               # nothing of the tree it was built from is left

    elsewhere = tmp_path / "elsewhere"
    small_run(elsewhere / "results" / "copied")
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "LANG": "C.UTF-8"}
    fwbench_command = venv / "bin" / "fwbench"
    assert "rebuild" in subprocess.run([str(fwbench_command), "--help"], env=env,
                                       capture_output=True, text=True, check=True).stdout
    done = subprocess.run([str(fwbench_command), "rebuild", "results/copied"], cwd=elsewhere,
                          env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-4000:]
    workflow = f"{site}/fwbench/_workflow/Snakefile"
    assert f"--snakefile {workflow}" in done.stderr          # the wheel's own workflow
    report = elsewhere / "results" / "copied" / "report"
    assert (report / "report.pdf").read_bytes().startswith(b"%PDF")
    assert "claims" in (report / "report.html").read_text().lower()
