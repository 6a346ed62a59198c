"""Validation of the sweep configuration against rules/schemas/config.schema.yaml, and the
resolved config a run keeps in its folder.

One error, naming the key and the bad value, before any job starts.
"""

from __future__ import annotations

import copy
import warnings
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from fwbench import SOURCE_DIR
from fwbench.errors import ConfigError, ConfigWarning

# A warm-up cut shorter than this is likely cut before its steady state: the changepoint
# analysis that fixes a cell's warm-up (fwbench.analysis.steady_state) finds segments of at
# least 5 steps, and the warm-ups it found in this project's CPU cells ran to 5-27 steps.
SHORT_WARMUP = 10

SCHEMA_PATH = SOURCE_DIR / "rules" / "schemas" / "config.schema.yaml"


def load_schema(path: Path = SCHEMA_PATH) -> dict:
    """The config schema, with the model names taken from the model zoo and the framework names
    from the framework registry (one source of truth each)."""
    from fwbench.plan.frameworks import FRAMEWORKS
    from fwbench.plan.models import MODELS

    with open(path) as f:
        schema = yaml.safe_load(f)
    properties = schema["properties"]
    properties["models"]["propertyNames"] = {"enum": sorted(MODELS)}
    properties["frameworks"]["items"]["enum"] = list(FRAMEWORKS)
    properties["controls"]["items"]["properties"]["framework"]["enum"] = list(FRAMEWORKS)
    return schema


def validate(config: dict, schema: dict | None = None) -> dict:
    """Return a validated copy of ``config`` with the schema's defaults filled in.

    Raises ConfigError with one message: which key, which value, what is allowed.
    """
    schema = schema or load_schema()
    config = copy.deepcopy(dict(config))
    errors = sorted(
        jsonschema.Draft202012Validator(schema).iter_errors(config),
        key=lambda e: (len(e.absolute_path), list(map(str, e.absolute_path))),
    )
    if errors:
        raise ConfigError(_describe(errors[0]))
    _fill_defaults(config, schema)
    _check_cross_fields(config)
    return config


def _describe(error: jsonschema.ValidationError) -> str:
    if error.validator == "anyOf":  # one name or a list: the error of the value's own branch
        best = jsonschema.exceptions.best_match([error])
        if best is not error:
            return _describe(best)
    key = _key_name(error.absolute_path)
    if error.validator == "additionalProperties":
        unknown = sorted(set(error.instance) - set(error.schema.get("properties", {})))
        allowed = ", ".join(sorted(error.schema.get("properties", {})))
        where = f" in {key}" if key != "<top level>" else ""
        return f"config: unknown key {unknown[0]!r}{where}; allowed keys: {allowed}."
    if error.validator == "required":
        return f"config: {error.message} (in {key})."
    if error.validator == "propertyNames":
        return f"config key {key}: unknown name {error.instance!r}; {error.message}."
    if error.validator == "uniqueItems":
        return f"config key {key}: values must not repeat, got {error.instance!r}."
    if error.validator == "minItems" and error.validator_value == 1:
        return f"config key {key}: must list at least one value, got an empty list."
    return f"config key {key}: {error.message}."


def _key_name(path) -> str:
    name = ""
    for part in path:
        name += f"[{part}]" if isinstance(part, int) else (f".{part}" if name else str(part))
    return repr(name) if name else "<top level>"


def _fill_defaults(instance: dict, schema: dict) -> None:
    """Fill the schema's defaults into ``instance``, recursively through nested objects."""
    for key, spec in schema.get("properties", {}).items():
        if key not in instance and "default" in spec:
            instance[key] = copy.deepcopy(spec["default"])
        if isinstance(instance.get(key), dict):
            _fill_defaults(instance[key], spec)
    extra = schema.get("additionalProperties")
    if isinstance(extra, dict):
        for key, value in instance.items():
            if key not in schema.get("properties", {}) and isinstance(value, dict):
                _fill_defaults(value, extra)


def _check_cross_fields(config: dict) -> None:
    from fwbench.plan.ablation import validate_ablation
    config["ablation"] = validate_ablation(config["ablation"])
    adaptive = config["adaptive"]
    if adaptive and adaptive["max_iterations"] < config["iterations"]:
        raise ConfigError(
            f"config key 'adaptive.max_iterations': {adaptive['max_iterations']} is below "
            f"'iterations' ({config['iterations']}), the minimum count; raise it or lower "
            "'iterations'."
        )
    if config["warmup"]["min"] > config["warmup"]["max"]:
        raise ConfigError(
            f"config key 'warmup': min ({config['warmup']['min']}) must not exceed "
            f"max ({config['warmup']['max']})."
        )
    warmup = config["warmup"]
    if warmup.get("max_s") and 2 * warmup["max_s"] > warmup["calibration_s"]:
        raise ConfigError(
            f"config key 'warmup.max_s': {warmup['max_s']} s needs a calibration at least twice "
            f"as long, to see a steady state after the longest warm-up it allows; "
            f"'warmup.calibration_s' is {warmup['calibration_s']} s: raise it to "
            f"{2 * warmup['max_s']:g} or lower max_s."
        )

    for k, selector in enumerate(config["controls"]):
        if not _selects_a_cell(config, selector):
            raise ConfigError(
                f"config key 'controls[{k}]': {selector} selects no cell of the sweep; name "
                "values the sweep has (its models, phases, frameworks, batch sizes, ...)."
            )

    from fwbench.plan.sweep import sizing_problems
    problem = next(sizing_problems(config), None)
    if problem:
        raise ConfigError(problem)

    if config["warmup"]["max"] < SHORT_WARMUP:  # allowed for smoke runs, but said
        warnings.warn(
            f"config key 'warmup.max': {config['warmup']['max']} is below {SHORT_WARMUP}: a "
            "warm-up the calibration finds longer than that is cut there, and that cell's trials "
            "are then timed before their steady state (recorded with warmup_steady false).",
            ConfigWarning, stacklevel=2)


def _selects_a_cell(config: dict, selector: dict) -> bool:
    from fwbench.plan.sweep import selects, sweep_cells
    return any(selects(selector, cell) for cell in sweep_cells(config))


def check_threads(config: dict, cores: int, needed: int | None = None) -> None:
    """Refuse a thread count above the cores the scheduler grants, naming both.

    ``needed`` is the most any trial takes (threads times the processes of a distributed cell).
    """
    needed = needed or config["threads"]
    if needed > cores:
        raise ConfigError(
            f"config key 'threads': trials need {needed} threads ({config['threads']} per "
            f"process) but Snakemake grants {cores} core(s); run with --cores {needed} or more, "
            f"or lower 'threads'."
        )


def read(path: str | Path) -> dict[str, Any]:
    """A YAML config file as written, not validated; a file that is missing or is no YAML
    mapping raises one ConfigError naming it and what is wrong, in one line."""
    try:
        with open(path) as f:
            config = yaml.safe_load(f)
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path} is not valid YAML: {_yaml_problem(exc)}") from None
    if config is None:
        return {}
    if not isinstance(config, dict):
        raise ConfigError(f"{path} holds a YAML {type(config).__name__}, not a mapping of "
                          "config keys")
    return config


def _yaml_problem(exc: yaml.YAMLError) -> str:
    """PyYAML's several-line message as one line: the problem, where, and its context."""
    mark = getattr(exc, "problem_mark", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
    context = getattr(exc, "context", None)
    return f"{getattr(exc, 'problem', None) or exc}{where}" + (f" ({context})" if context else "")


def load(path: str | Path) -> dict[str, Any]:
    """Read and validate a YAML config file; an invalid one names the file."""
    config = read(path)
    try:
        return validate(config)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None


SAVED_HEADER = """\
# The resolved config this run measured with (every default filled in), written by the
# workflow when the run started. Its `statistics` block is the run's analysis plan.
# `fwbench rebuild` plans from this file, not from the workflow's config.yaml.
"""


def save(config: dict, path: str | Path) -> bool:
    """Keep the resolved ``config`` a run measures with in its folder (``path``), from which it
    rebuilds wherever the folder goes; True if written. A file there that validates to the same
    config is left as it is: a rebuild rewrites nothing, and the shipped reference keeps its
    commented file."""
    from fwbench.files import write_atomic

    try:
        with warnings.catch_warnings():   # said once already, when the workflow read it
            warnings.simplefilter("ignore")
            if load(path) == config:
                return False
    except ConfigError:   # none yet, or one that no longer validates
        pass
    write_atomic(path, SAVED_HEADER + yaml.safe_dump(config, sort_keys=False))
    return True
