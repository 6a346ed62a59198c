"""Where the time goes, framework-neutral: a profiler's trace reduced to the same breakdown for
both frameworks.

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
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cache

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
