"""Where the time goes: one profiled run per cell, reduced to a framework-neutral breakdown.

Framework-free. Each framework's own profiler (``frameworks/<fw>/profiler.py``: torch.profiler,
the TensorFlow profiler) records a few steps and hands back a ``Trace``: the step windows and
every span it saw, each marked as an operator (``op``), a device kernel (``kernel``) or host-side
framework code (``host``). ``breakdown`` turns a trace into the same numbers for both frameworks:

- time in operators, by class: convolution, matmul, normalization, elementwise, memory (copies,
  layout changes, allocation, views, variable reads), fused (compiled code whose operators the
  profiler cannot separate: XLA clusters, torch.compile's generated kernels) and other (pooling,
  reductions, losses, anything unnamed here);
- host overhead: on the CPU, the part of each step during which no operator runs on any thread
  (Python, dispatch, autograd bookkeeping, function-call set-up); on a GPU, the part during which
  the device runs no kernel and no copy, i.e. it idles waiting for the host.

On the CPU an operator's time is its *self* time: its span minus the operator spans nested in it
on the same thread (``aten::conv2d`` → ``aten::convolution`` → ``aten::mkldnn_convolution`` each
keep their own share, all of it convolution). Operators on several threads at once (TensorFlow's
inter-op pool, XLA thunks) can add up to more than the wall time they cover; the classes are then
scaled down to the time covered, and ``overlap`` records the factor.

The profiled run is not a trial: it is written to ``<cell dir>/profile.json`` (schema
``rules/schemas/profile.schema.yaml``, ``"kind": "profile"``), so no table of timings ever reads
it, and its times (inflated by the profiler) never enter the statistics.

Usage::

    run_profile(TrialSettings.from_dict(params), "results/default/cells/.../profile.json")
    table = collect_profiles(paths)                                   # host side, tidy
"""

from __future__ import annotations

import dataclasses
import json
import re
import sys
from dataclasses import dataclass, field
from functools import cache

from fwbench import SOURCE_DIR
from fwbench.measure.child import ENTRIES, THROUGHPUT, load_backend, thread_environment, trial_entry
from fwbench.measure.settings import TrialPayload, TrialSettings

CLASSES = ("convolution", "matmul", "normalization", "elementwise", "memory", "fused", "other")
HOST = "host_overhead"
CATEGORIES = (*CLASSES, HOST)
CATEGORY_LABELS = {
    "convolution": "convolution", "matmul": "matrix multiply", "normalization": "normalization",
    "elementwise": "elementwise", "memory": "memory (copies, layout, allocation)",
    "fused": "fused (compiled)", "other": "other operators", HOST: "host overhead",
}

# The annotation both profilers put around one step; the breakdown covers these windows only.
STEP_NAME = "fwbench_step"
PROFILE_KIND = "profile"
JSON_VERSION = 1
SCHEMA_PATH = SOURCE_DIR / "rules" / "schemas" / "profile.schema.yaml"
ENTRY = "fwbench.measure.profiling:profile_trial"
# A profiled step slower than this many unprofiled steps is flagged: the profiler's own cost
# (one record per operator) then inflates the host share noticeably.
OVERHEAD_WARNING = 1.5
DEFAULT_STEPS = 5

# Operator classes by name, first match wins; names are lower-cased, without "aten::" and
# without XLA's ".N" suffix. Convolution comes before matmul (implicit-GEMM convolution kernels).
_RULES = (
    ("convolution", r"convolution|convolve|conv[123]d|depthwiseconv|conv_?transpose"
                    r"|(^|_)(fprop|dgrad|wgrad)|winograd|implicit_?gemm"),
    ("matmul", r"^mm$|^addmm|^mmbackward|^bmm|^baddbmm|matmul|^linear|gemm|gemv|^dot(_|$)|einsum"
               r"|^addmv|^mv$|^_?fusedmatmul|^_mklmatmul"),
    ("normalization", r"batch_?norm|layer_?norm|group_?norm|instance_?norm|rms_?norm|^bn_"
                      r"|_bn_|welford"),
    ("fused", r"^## call compiledfxgraph|^__inference_|^__forward_|^__backward_|xlarun"
              r"|xlalaunch|^triton_|^cpp_fused|^cluster_"),
)
# Whole names (after the rules above) that only move, lay out, allocate or view data.
_MEMORY = re.compile(
    r"^(copy_?|to|_to_copy|contiguous|clone|empty(_strided|_like)?|new_empty(_strided)?|resize_"
    r"|as_strided_?|view|_unsafe_view|reshape|_reshape_alias|transpose|t|permute|expand"
    r"|squeeze|unsqueeze|flatten|cat|concat(v2)?|concatenate|stack|slice|select|index"
    r"|index_select|gather|narrow|unbind|split|pack|unpack|tile|pad|detach_?|alias|lift_fresh"
    r"|resolve_conj|resolve_neg|memcpy.*|memset.*|identity|identityn|readvariableop"
    r"|assignvariableop|const|shape|shapen|broadcastgradientargs|expanddims|broadcastto"
    r"|broadcast|bitcast|iota|zeros(_like)?|ones(_like)?|fill_?|zero_|accumulategrad"
    r"|strided_?slice|stridedslice|squeezebackward\d*"
    r"|viewbackward\d*|tbackward\d*|reshapealias.*|dynamic_?slice|dynamic_?update_?slice"
    r"|_noop|noop)$")
_ELEMENTWISE = re.compile(
    r"relu|sigmoid|tanh|gelu|silu|swish|elu|softplus|hardtanh|leaky|threshold|clamp|add|sub"
    r"|mul|div|neg|exp|log|sqrt|rsqrt|pow|square|abs|maximum|minimum|where|cast|biasadd|dropout"
    r"|softmax|crossentropy|apply|sgd|adam|momentum|foreach|lerp|sign|floor|ceil|round|erf"
    r"|reciprocal|logical|equal|greater|less|compare|select_?v2|not_?equal|bias|scale|convert")
# Words of XLA fusion names (e.g. "transpose_copy_fusion") that only move data.
_MEMORY_WORDS = {"copy", "transpose", "bitcast", "concatenate", "broadcast", "slice", "pad",
                 "reshape", "iota", "dynamic", "update", "gather", "scatter", "wrapped", "fusion",
                 "input", "loop", "tuple", "get", "element"}


@cache
def classify(op_type: str) -> str:
    """The class of an operator (one of ``CLASSES``) from its name or type, either framework.

    ``aten::conv2d``, ``Conv2DBackpropFilter``, ``_FusedConv2D`` → convolution; ``aten::addmm``,
    ``MatMul`` → matmul; ``FusedBatchNormV3`` → normalization; XLA's ``transpose_copy_fusion`` →
    memory; ``broadcast_maximum_fusion`` → elementwise; ``aten::max_pool2d`` → other.
    """
    name = op_type.strip().lower()
    name = re.sub(r"^(\w+::)+", "", name)  # aten::, torch::autograd::
    name = re.sub(r"(\.\d+)+$", "", name)  # XLA instruction numbers
    name = re.sub(r"^wrapped_", "", name)
    for cls, pattern in _RULES:
        if re.search(pattern, name):
            return cls
    if "fusion" in name:  # an XLA fusion named after its ops
        words = set(re.split(r"[_\-]+", name)) - {""}
        if words <= _MEMORY_WORDS:
            return "memory"
        return "elementwise" if _ELEMENTWISE.search(name) else "other"
    if _MEMORY.match(name):
        return "memory"
    if _ELEMENTWISE.search(name):
        return "elementwise"
    return "other"


# --- traces ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Span:
    """One interval a profiler recorded, on one thread (CPU) or one stream (GPU).

    ``kind``: ``op`` (an operator running on the host), ``kernel`` (device work: a kernel, a copy
    or a memset), ``host`` (framework code that is not an operator). ``op_type`` names the
    operator for classification (the launching operator for a kernel, where known).
    """

    lane: str
    start_ns: float
    end_ns: float
    name: str
    kind: str
    op_type: str = ""


@dataclass
class Trace:
    """What one framework's profiler saw over ``len(steps)`` step windows."""

    framework: str
    device: str
    profiler: str
    steps: list[tuple[float, float]]
    spans: list[Span] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _union(intervals) -> list[tuple[float, float]]:
    merged: list[list[float]] = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [(a, b) for a, b in merged]


def _length(intervals) -> float:
    return sum(b - a for a, b in intervals)


def _clip(spans, windows):
    """Each span cut to the step windows (a span outside every window is dropped)."""
    out = []
    for s in spans:
        for a, b in windows:
            start, end = max(s.start_ns, a), min(s.end_ns, b)
            if end > start:
                out.append(Span(s.lane, start, end, s.name, s.kind, s.op_type))
    return out


def self_times(spans) -> list[tuple[Span, float]]:
    """(span, self time) for each span: its duration minus the spans nested directly in it on the
    same lane. Spans are assumed properly nested per lane, as both profilers record them."""
    out = []
    by_lane: dict[str, list[Span]] = {}
    for s in spans:
        by_lane.setdefault(s.lane, []).append(s)
    for lane_spans in by_lane.values():
        ordered = sorted(lane_spans, key=lambda s: (s.start_ns, -s.end_ns))
        stack: list[list] = []  # [span, child time]
        for s in ordered:
            while stack and s.start_ns >= stack[-1][0].end_ns:
                top, child = stack.pop()
                out.append((top, max(top.end_ns - top.start_ns - child, 0.0)))
            if stack:
                stack[-1][1] += min(s.end_ns, stack[-1][0].end_ns) - s.start_ns
            stack.append([s, 0.0])
        while stack:
            top, child = stack.pop()
            out.append((top, max(top.end_ns - top.start_ns - child, 0.0)))
    return out


def breakdown(trace: Trace, *, top: int = 12) -> dict:
    """The framework-neutral breakdown of a trace: ns per step in each category, their shares
    (summing to 1), the busiest operators, and how the numbers were obtained.

    Usage::

        b = breakdown(trace)
        b["per_step_ns"]["convolution"], b["share"]["host_overhead"]
    """
    windows = _union(trace.steps)
    wall = _length(windows)
    n = max(len(trace.steps), 1)
    device_side = trace.device != "cpu" and any(s.kind == "kernel" for s in trace.spans)
    unit = "kernel" if device_side else "op"
    spans = _clip([s for s in trace.spans if s.kind == unit], windows)
    busy = _length(_union((s.start_ns, s.end_ns) for s in spans))
    per_class = dict.fromkeys(CLASSES, 0.0)
    per_op: dict[tuple[str, str], float] = {}
    timed = self_times(spans) if unit == "op" else [(s, s.end_ns - s.start_ns) for s in spans]
    for span, t in timed:
        key = span.op_type or span.name
        cls = classify(key)
        per_class[cls] += t
        per_op[(key, cls)] = per_op.get((key, cls), 0.0) + t
    summed = sum(per_class.values())
    overlap = summed / busy if busy > 0 else 1.0
    scale = busy / summed if summed > busy > 0 else 1.0
    per_class = {c: v * scale for c, v in per_class.items()}
    host = max(wall - busy, 0.0)
    totals = {**per_class, HOST: host}
    notes = list(trace.notes)
    if overlap > 1.0 + 1e-6:
        notes.append(f"operators overlapped on several threads ({overlap:.2f}x the time they "
                     "cover): classes scaled to the covered time")
    if not spans:
        notes.append(f"the profiler recorded no {unit} inside the step windows")
    ops = sorted(per_op.items(), key=lambda kv: -kv[1])[:top]
    return {
        "framework": trace.framework,
        "device": trace.device,
        "profiler": trace.profiler,
        "steps": len(trace.steps),
        "basis": ("device kernels and copies; host overhead is the device idle waiting for the "
                  "host" if device_side else
                  "operator self time on the host; host overhead is step time outside every "
                  "operator"),
        "wall_ns_per_step": wall / n,
        "per_step_ns": {c: totals[c] / n for c in CATEGORIES},
        "share": {c: (totals[c] / wall if wall > 0 else 0.0) for c in CATEGORIES},
        "overlap": overlap,
        "top_ops": [{"op": op, "class": cls, "ns_per_step": t / n} for (op, cls), t in ops],
        "notes": notes,
    }


# --- the child: build the backend, profile a few steps --------------------------------------------

@trial_entry
def profile_trial(settings: TrialSettings) -> TrialPayload:
    """Child side (supervised like a trial): build the cell's backend as a throughput trial does
    (fwbench.measure.throughput), warm up, time a few unprofiled steps, then profile
    ``profile_steps`` steps (one more, dropped, absorbs the profiler's start-up) with the
    framework's own profiler. The breakdown is the payload's detail ``profile``."""
    import importlib
    import tempfile
    import time

    from fwbench.errors import Unsupported
    from fwbench.measure import provenance

    cell = settings.cell
    if ENTRIES[cell.experiment] != THROUGHPUT:
        raise Unsupported(f"profiling covers the single-step experiments (throughput, ablation); "
                          f"the {cell.experiment} experiment runs its own loop "
                          f"({ENTRIES[cell.experiment]})")
    backend, in_force = load_backend(settings)
    step, sync = backend.step(), backend.synchronize
    steps = settings.profile_steps or DEFAULT_STEPS
    for _ in range(max(settings.warmup_min, 2) + 1):  # cold start and warm-up
        step()
    sync()
    unprofiled = []
    for _ in range(steps):
        sync()
        start = time.perf_counter_ns()
        step()
        sync()
        unprofiled.append(time.perf_counter_ns() - start)
    with tempfile.TemporaryDirectory(prefix="fwbench-profile-") as workdir:
        profiler = importlib.import_module(f"fwbench.measure.frameworks.{cell.framework}.profiler")
        trace = profiler.capture(step, sync, steps=steps + 1, device=cell.device,
                                 workdir=workdir)
    trace.steps = trace.steps[1:]  # the first profiled step pays the profiler's start-up
    result = breakdown(trace)
    unprofiled_ns = sorted(unprofiled)[len(unprofiled) // 2]
    result["unprofiled_ns_per_step"] = unprofiled_ns
    result["profiler_overhead"] = (result["wall_ns_per_step"] / unprofiled_ns
                                   if unprofiled_ns else None)
    if result["profiler_overhead"] and result["profiler_overhead"] > OVERHEAD_WARNING:
        result["notes"].append(
            f"a profiled step took {result['profiler_overhead']:.2f}x an unprofiled one: the "
            "profiler's own cost inflates the host overhead share")
    return TrialPayload(
        settings_in_force=in_force,
        versions={**backend.versions(), **provenance.framework_runtime(cell.framework)},
        details={"profile": result})


# --- the parent: supervise, write, read ----------------------------------------------------------

def run_profile(settings: TrialSettings, out_path) -> dict:
    """Profile one cell in a supervised fresh process and write ``profile.json`` atomically.

    ``settings``: the trial settings of any trial of the cell (``Plan.trial_settings``), with
    ``profile_steps``. A failure is written too, with its status and message.
    """
    from datetime import datetime, timezone

    from fwbench.environment import source
    from fwbench.measure.results import write_json
    from fwbench.measure.supervisor import supervise

    started = datetime.now(timezone.utc).isoformat()
    outcome = supervise(ENTRY, settings.to_dict(), timeout_s=settings.timeout_s,
                        memory_limit_mb=settings.memory_limit_mb,
                        env=thread_environment(settings.threads))
    payload = TrialPayload.from_dict(outcome.payload)
    result = {
        "schema_version": JSON_VERSION,
        "kind": PROFILE_KIND,
        "run": settings.run,
        "cell_id": settings.cell_id,
        "pair_id": settings.pair_id,
        "cell": settings.cell.to_dict(),
        "status": outcome.status,
        "message": outcome.message,
        "profile_steps": settings.profile_steps or DEFAULT_STEPS,
        "profile": payload.details.get("profile"),
        "settings_in_force": payload.settings_in_force,
        "versions": payload.versions,
        "started_at": started,
        "ended_at": datetime.now(timezone.utc).isoformat(),
        "workflow": source.git_state(),
    }
    validate_profile(result)
    write_json(result, out_path)
    return result


def validate_profile(data: dict, source: str = "profile result") -> dict:
    """Check a profile result against its schema; raise ResultError naming what is wrong."""
    from fwbench.errors import ResultError
    from fwbench.measure.results import check_schema, schema_validator

    if data.get("kind") != PROFILE_KIND or data.get("schema_version") != JSON_VERSION:
        raise ResultError(f"{source}: not a profile result of version {JSON_VERSION} (kind "
                          f"{data.get('kind')!r}, schema_version {data.get('schema_version')!r})")
    return check_schema(data, schema_validator(SCHEMA_PATH), source)


PROFILE_COLUMNS = ["run", "cell_id", "pair_id", "experiment", "device", "framework", "model",
                   "phase", "batch_size", "input_shape", "precision", "mode", "profile",
                   "status", "message", "category", "ns_per_step", "share", "wall_ns_per_step",
                   "unprofiled_ns_per_step", "profiler_overhead", "overlap", "steps", "profiler",
                   "basis", "top_ops", "notes"]


def collect_profiles(paths):
    """The profiles table (pandas): one row per profiled cell and category (``CATEGORIES``); a
    failed profile is one row with its status and message and no category."""
    import pandas as pd

    from fwbench.errors import ResultError

    rows = []
    for path in paths:
        try:
            with open(path) as f:
                data = json.load(f)
        except (OSError, json.JSONDecodeError) as exc:
            raise ResultError(f"cannot read profile result {path}: {exc}") from exc
        validate_profile(data, str(path))
        cell = data["cell"]
        base = {"run": data["run"], "cell_id": data["cell_id"], "pair_id": data["pair_id"],
                **{k: cell[k] for k in ("experiment", "device", "framework", "model", "phase",
                                        "batch_size", "precision", "mode", "profile")},
                "input_shape": "x".join(map(str, cell["input_shape"])),
                "status": data["status"], "message": data["message"]}
        p = data.get("profile")
        if data["status"] != "ok" or not p:
            rows.append(base)
            continue
        extra = {"wall_ns_per_step": p["wall_ns_per_step"],
                 "unprofiled_ns_per_step": p.get("unprofiled_ns_per_step"),
                 "profiler_overhead": p.get("profiler_overhead"), "overlap": p["overlap"],
                 "steps": p["steps"], "profiler": p["profiler"], "basis": p["basis"],
                 "top_ops": json.dumps(p["top_ops"]), "notes": "; ".join(p["notes"])}
        for category in CATEGORIES:
            rows.append({**base, "category": category, "ns_per_step": p["per_step_ns"][category],
                         "share": p["share"][category], **extra})
    return pd.DataFrame(rows, columns=PROFILE_COLUMNS)


def main(argv: list[str] | None = None) -> int:
    """``python -m fwbench.measure.profiling --settings JSON --out profile.json`` (a workflow
    job)."""
    import argparse

    from fwbench.measure.supervisor import Interrupted, stop_on_signals

    parser = argparse.ArgumentParser(prog="python -m fwbench.measure.profiling",
                                     description=main.__doc__)
    parser.add_argument("--settings", required=True, help="the cell's trial settings as JSON")
    parser.add_argument("--out", required=True, help="path of <cell dir>/profile.json")
    parser.add_argument("--steps", type=int, help="profiled steps (default: settings' "
                        f"profile_steps, else {DEFAULT_STEPS})")
    args = parser.parse_args(argv)
    settings = TrialSettings.from_dict(json.loads(args.settings))
    if args.steps:
        settings = dataclasses.replace(settings, profile_steps=args.steps)
    stop_on_signals()
    try:
        result = run_profile(settings, args.out)
    except Interrupted as exc:
        print(f"fwbench: profile interrupted, nothing written: {exc}", file=sys.stderr)
        return 130
    p = result["profile"] or {}
    summary = ", ".join(f"{c} {v:.0%}" for c, v in (p.get("share") or {}).items() if v >= 0.01)
    print(f"{result['cell_id']} profile: {result['status']} ({summary or result['message']})",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
