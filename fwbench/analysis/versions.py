"""The version audit: which software each framework's trials ran with (one table per run), and
what differs between two runs. ``python -m fwbench.analysis.versions`` is the audit rules'
command."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from fwbench.files import write_atomic

AUDIT_FIELDS = ["framework", "environment", "item", "value", "trials"]
DIFF_FIELDS = ["framework", "item", "change", "this_run", "other_run"]


def audit_items(env: dict) -> list[tuple[str, str]]:
    """(item, value) pairs of one trial's env.json, in a stable order; values are strings."""
    items: list[tuple[str, object]] = []
    container = env.get("container", "none")
    if isinstance(container, dict):
        label = container.get("label") or {}
        items += [("container", container.get("reference") or container.get("image_file")),
                  ("image digest", container.get("digest")),
                  ("image engine", container.get("engine")),
                  ("image tag", container.get("tag")),
                  ("image variant", label.get("variant")),
                  ("image base", label.get("base_image")),
                  ("image base digest", label.get("base_digest")),
                  ("image lock sha256", label.get("lock_sha256")),
                  ("image source date", label.get("source_date") or label.get("built_at"))]
        # The CUDA stack the image carries, read inside it at build time (label version 3):
        # the libraries' own versions, the framework's build, the oldest driver it needs.
        stack = label.get("cuda_stack") or {}
        if stack:
            libraries = stack.get("libraries") or {}
            items += [("image CUDA runtime", libraries.get("cuda_runtime")),
                      ("image cuDNN", libraries.get("cudnn")),
                      ("image NCCL", libraries.get("nccl")),
                      ("image minimum NVIDIA driver", stack.get("driver_minimum"))]
            items += [(f"image framework build {key}", value)
                      for key, value in sorted((stack.get("framework") or {}).items())]
    else:
        items += [("container", "none"), ("image digest", "none (native run, no image)")]
    build = env.get("framework_build") or {}
    items += [("python", env.get("python")),
              ("framework version", env.get("framework_version")),
              ("framework CUDA (build)", env.get("cuda")),
              ("framework cuDNN (build)", env.get("cudnn")),
              ("framework git version", build.get("git_version")),
              ("framework compiler", build.get("compiler"))]
    for key, value in sorted((build.get("build_info") or {}).items()):
        items.append((f"framework build_info {key}", value))
    for lib in env.get("loaded_libraries") or []:
        items.append((f"loaded {lib['name']}",
                      lib.get("package") or lib.get("version") or lib.get("realpath")))
    gpus = env.get("gpus") or {}
    devices = gpus.get("devices") or []
    items += [("NVIDIA driver", gpus.get("driver") or gpus.get("reason")),
              ("GPU count", gpus.get("count")),
              ("GPU names", ", ".join(sorted({d["name"] for d in devices})) or None)]
    cpu, osys = env.get("cpu") or {}, env.get("os") or {}
    items += [("CPU model", cpu.get("model") or env.get("cpu_model")),
              ("CPU logical cores", cpu.get("logical_cores") or env.get("cpu_count")),
              ("memory bytes", env.get("memory_bytes")),
              ("OS", osys.get("name") or env.get("platform")),
              ("kernel", osys.get("kernel")),
              ("libc", osys.get("libc"))]
    workflow = env.get("workflow") or {}
    items += [("workflow commit", workflow.get("git_commit")),
              ("workflow dirty", workflow.get("git_dirty"))]
    for name, value in (env.get("environment_variables") or {}).items():
        items.append((f"env {name}", value))
    for name, version in (env.get("packages") or {}).items():
        items.append((f"package {name}", version))
    return [(item, "" if value is None else str(value)) for item, value in items]


def environment_key(env: dict) -> str:
    """The environment a trial ran in: its image reference, or the native host."""
    container = env.get("container", "none")
    if isinstance(container, dict):
        return container.get("reference") or container.get("image_file") or "unknown image"
    return f"native on {env.get('hostname', 'unknown host')}"


def versions_table(trials: list[tuple[str, dict]]) -> list[dict]:
    """One row per framework, environment, item and distinct value, with its trial count.

    ``trials`` holds ``(framework, env)`` per trial. An item with two values in one environment
    gets two rows: the trials disagree, and the table shows it.
    """
    counts: dict[tuple, int] = {}
    order: dict[str, int] = {}
    for framework, env in trials:
        for item, value in audit_items(env):
            order.setdefault(item, len(order))
            key = (framework, environment_key(env), item, value)
            counts[key] = counts.get(key, 0) + 1
    rows = [dict(zip(AUDIT_FIELDS, (*key, n))) for key, n in counts.items()]
    return sorted(rows, key=lambda r: (r["framework"], r["environment"], order[r["item"]],
                                       r["value"]))


def diff_versions(this: list[dict], other: list[dict]) -> list[dict]:
    """What differs between two runs' version tables, per framework and item."""
    def values(rows):
        found: dict[tuple, set] = {}
        for r in rows:
            found.setdefault((r["framework"], r["item"]), set()).add(r["value"])
        return found

    a, b = values(this), values(other)
    rows = []
    for key in sorted(a.keys() | b.keys()):
        if a.get(key) == b.get(key):
            continue
        change = "changed" if key in a and key in b else (
            "only in this run" if key in a else "only in the other run")
        rows.append(dict(zip(DIFF_FIELDS, (*key, change, " | ".join(sorted(a.get(key, ()))),
                                           " | ".join(sorted(b.get(key, ())))))))
    return rows


def read_csv(path) -> list[dict]:
    import csv

    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def write_csv(rows: list[dict], fields: list[str], path) -> None:
    """Write atomically (fwbench.files.write_atomic)."""
    import csv
    import io

    text = io.StringIO(newline="")
    writer = csv.DictWriter(text, fieldnames=fields)
    writer.writeheader()
    writer.writerows(rows)
    write_atomic(path, text.getvalue())


def audited_runs(results: str | os.PathLike = "results", exclude: str | None = None) -> list[str]:
    """Runs under ``results`` whose versions table exists (results/<run>/audit/versions.csv)."""
    return sorted(p.parent.parent.name for p in Path(results).glob("*/audit/versions.csv")
                  if p.parent.parent.name != exclude)


def _load_trial_env(env_path: str) -> tuple[str, dict]:
    """(framework, env) of one trial: the framework from its validated result file beside it."""
    from fwbench.measure import results

    result = results.load_trial(env_path.removesuffix(".env.json") + ".json")
    with open(env_path) as f:
        return result["cell"]["framework"], json.load(f)


def main(argv: list[str] | None = None) -> int:
    """``python -m fwbench.analysis.versions versions|diff`` — the audit rules' commands."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m fwbench.analysis.versions",
                                     description=main.__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    versions = commands.add_parser("versions", help="versions table of one run's trials")
    versions.add_argument("--out", required=True, help="versions.csv to write")
    versions.add_argument("envs", nargs="*", help="trial-<k>.env.json files")
    diff = commands.add_parser("diff", help="what differs between two versions tables")
    diff.add_argument("--out", required=True, help="diff CSV to write")
    diff.add_argument("this", help="this run's versions.csv")
    diff.add_argument("other", help="the other run's versions.csv")
    args = parser.parse_args(argv)
    if args.command == "versions":
        rows = versions_table([_load_trial_env(p) for p in args.envs])
        write_csv(rows, AUDIT_FIELDS, args.out)
        print(f"{len(args.envs)} trials, {len(rows)} rows -> {args.out}", file=sys.stderr)
    else:
        rows = diff_versions(read_csv(args.this), read_csv(args.other))
        write_csv(rows, DIFF_FIELDS, args.out)
        print(f"{len(rows)} differences -> {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
