"""Trial result files: written by the trial, validated when read. Framework-free.

Every file is written atomically (temporary file, then rename) and validated when read.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from functools import cache
from pathlib import Path

import jsonschema
import yaml

from fwbench import SOURCE_DIR, __version__
from fwbench.errors import ResultError
from fwbench.files import write_atomic
from fwbench.measure.payload import TrialPayload
from fwbench.plan.contract import TrialSettings

# Version history of the trial result file:
# 1 — first version: cell, status, cold start, warm-up, every iteration, settings, git state.
#     Since kept with the same fields and meanings widened, so older results read as before:
#     single steps and blocks timed for a budget, blocks sized per trial, a warm-up fixed per
#     cell (settings.requested.warmup), trial 0 a cell's calibration trial.
JSON_VERSION = 1
SCHEMA_PATH = SOURCE_DIR / "rules" / "schemas" / "trial.schema.yaml"


def write_json(data: dict, path: str | os.PathLike) -> None:
    """Write ``data`` so that a reader sees the old file or the whole new one, never half."""
    write_atomic(path, json.dumps(data, indent=1, sort_keys=True))


@cache
def schema_validator(path: Path = SCHEMA_PATH) -> jsonschema.Draft202012Validator:
    """The validator of one of rules/schemas/, read once per process."""
    with open(path) as f:
        return jsonschema.Draft202012Validator(yaml.safe_load(f))


def check_schema(data: dict, validator: jsonschema.Draft202012Validator, source: str) -> dict:
    """Raise ResultError naming where ``data`` breaks its schema, and how; else return it."""
    error = jsonschema.exceptions.best_match(validator.iter_errors(data))
    if error is not None:
        where = "/".join(map(str, error.absolute_path)) or "<top level>"
        raise ResultError(f"{source}: invalid at {where}: {error.message}")
    return data


def validate_trial(data: dict, source: str = "trial result") -> dict:
    version = data.get("schema_version")
    if version != JSON_VERSION:
        raise ResultError(f"{source}: unknown schema_version {version!r}; this fwbench reads "
                          f"version {JSON_VERSION}")
    return check_schema(data, schema_validator(), source)


def read_json(path: str | os.PathLike, what: str) -> dict:
    """A JSON object the workflow wrote, or one ResultError in one line naming ``what``, the
    file and what is wrong with it (missing, empty, cut short, not an object)."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except OSError as exc:
        raise ResultError(f"cannot read {what} {path}: {exc.strerror}") from exc
    except json.JSONDecodeError as exc:
        why = ("the file is empty" if not exc.doc.strip() else
               f"not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno}): the "
               "file is truncated or damaged")
        raise ResultError(f"cannot read {what} {path}: {why}") from exc
    except UnicodeDecodeError as exc:
        raise ResultError(f"cannot read {what} {path}: not UTF-8 text ({exc.reason} at byte "
                          f"{exc.start})") from exc
    if not isinstance(data, dict):
        raise ResultError(f"cannot read {what} {path}: it holds a JSON {type(data).__name__}, "
                          "not an object")
    return data


def load_trial(path: str | os.PathLike) -> dict:
    """Read and validate one trial result."""
    return validate_trial(read_json(path, "trial result"), str(path))


def samples_per_iteration(cell: dict, details: dict) -> int:
    """Samples one timed iteration processes: a batch, an epoch-long run, an epoch, or the
    global batch of a distributed step."""
    batch = cell["batch_size"]
    if cell["experiment"] == "epoch":
        return batch * details.get("steps", 1)
    if cell["experiment"] == "convergence" and details.get("epochs"):
        return batch * details["epochs"][0]["steps"]
    return details.get("global_batch_size", batch)


def make_result(settings: TrialSettings | Mapping, outcome, *, started_at: str, ended_at: str,
                workflow: dict) -> dict:
    """The trial result: what was asked (settings), what happened (outcome), and when.

    Both are checked here, where the result is made: ``settings`` (the plan's dict is read as
    TrialSettings) and the child's payload (TrialPayload): a ConfigError or ResultError names
    the field."""
    if not isinstance(settings, TrialSettings):
        settings = TrialSettings.from_dict(settings)
    payload = TrialPayload.from_dict(outcome.payload)
    return {
        "schema_version": JSON_VERSION,
        "run": settings.run,
        "cell_id": settings.cell_id,
        "pair_id": settings.pair_id,
        "cell": settings.cell.to_dict(),
        "trial": settings.trial,
        "group_position": settings.group_position,
        "status": outcome.status,
        "message": outcome.message,
        "cold_start_ns": payload.cold_start_ns,
        "warmup_ns": payload.warmup_ns,
        "warmup_steady": payload.warmup_steady,
        "iteration_ns": payload.iteration_ns,
        "stop_reason": payload.stop_reason,
        "block_size": payload.block_size,
        "block_ns": payload.block_ns,
        "markers_ns": payload.markers_ns,
        "settings": {"requested": settings.requested(), "in_force": payload.settings_in_force},
        "versions": payload.versions,
        "peak_rss_bytes": payload.peak_rss_bytes,
        "peak_memory": payload.peak_memory,
        "details": payload.details,
        "started_at": started_at,
        "ended_at": ended_at,
        "workflow": workflow,
        "fwbench_version": __version__,
    }
