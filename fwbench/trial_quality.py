"""Which trials can support a confirmatory verdict, and which interleaved pairs really ran back
to back. Framework-free; ``fwbench.stats`` applies it to every comparison, the report counts it.

A verdict drawn from too few trials, from a trial whose warm-up never settled, or from a trial
whose timed iterations drift is only a hint: the comparison is ``exploratory``, with the reason.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

# Columns the harness may record per trial for drift within its timed iterations; without one,
# the statistics compute drift from the iterations (fwbench.stats._drift).
DRIFT_COLUMNS = ("drift_detected", "drift")


def recorded_drift(trials: pd.DataFrame) -> pd.Series:
    """Per trial row: the drift the trial recorded (True/False), or NA where it recorded none."""
    for column in DRIFT_COLUMNS:
        if column in trials and trials[column].notna().any():
            return trials[column].astype("boolean")
    return pd.Series(pd.NA, index=trials.index, dtype="boolean")


def exploratory_reasons(n_pytorch: int, n_tensorflow: int, min_trials: int, *,
                        unsteady: int = 0, drifting: int = 0) -> list[str]:
    """Why a comparison's verdict is only a hint (empty: it may confirm). ``unsteady`` and
    ``drifting`` count its trials, both frameworks together."""
    reasons = []
    smaller = min(n_pytorch, n_tensorflow)
    if smaller < min_trials:
        reasons.append(f"{smaller} trials on the smaller side, fewer than {min_trials}")
    total = n_pytorch + n_tensorflow
    if unsteady:
        reasons.append(f"{unsteady} of {total} trials never reached a steady warm-up")
    if drifting:
        reasons.append(f"{drifting} of {total} trials drift within their timed iterations")
    return reasons


def count_false(values) -> int:
    """How many values are False (None and NA, "not recorded", are not)."""
    return int(sum(1 for v in values if v is not None and v is not pd.NA
                   and not (isinstance(v, float) and np.isnan(v)) and not bool(v)))
