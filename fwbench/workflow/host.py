"""The environment the workflow gives its host jobs: its own interpreter first on PATH, and
numpy's baseline kernels only (rules/common.smk sets both before any job starts)."""

from __future__ import annotations

import os
import sys


def own_python_first(environ) -> None:
    """Put the folder of the interpreter running Snakemake first on the jobs' PATH, so a host
    job's `python -m fwbench` runs in the workflow's own environment whatever PATH held (as
    Snakemake runs `script:` rules with it); a job in a container gets its image's PATH from
    Apptainer instead. The folder is resolved, as every path the workflow records."""
    environ["PATH"] = os.pathsep.join([os.path.realpath(os.path.dirname(sys.executable)),
                                       environ.get("PATH", os.defpath)])


# numpy's variable naming the SIMD targets it must not dispatch to (read once, at its import).
NUMPY_DISPATCH = "NPY_DISABLE_CPU_FEATURES"


def baseline_numpy(environ) -> None:
    """Have the host jobs' numpy run its baseline kernels only, on any processor, so that a
    rebuild gives the same bytes everywhere. numpy picks faster kernels at run time by what the
    processor offers, and its AVX-512 ones (SVML's log, exp, power) differ from the others in
    last bits: on an AVX-512 host, a log axis's coordinates moved in an SVG's sixth decimal.
    Rounding inputs cannot help where matplotlib takes the logarithm itself. Every target this
    numpy build dispatches to is disabled (AVX2 too: its tanh differs from the baseline's). The
    measuring processes drop the variable (``fwbench.measure.supervisor``): a framework is timed
    with numpy as it comes."""
    from numpy._core import _multiarray_umath

    environ[NUMPY_DISPATCH] = " ".join(_multiarray_umath.__cpu_dispatch__)
