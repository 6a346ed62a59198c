"""PyTorch's profiler (torch.profiler) over a few steps, read back as a framework-neutral trace.

The mirror image of frameworks/tensorflow/profiler.py: ``capture`` runs the steps under the
profiler, each inside a ``fwbench_step`` annotation that ends with a synchronization, writes the
Chrome trace to a temporary folder, and turns its events into ``fwbench.measure.trace.Span``s.
"""

from __future__ import annotations

import json
import os
import re

import torch
from torch.profiler import ProfilerActivity, profile, record_function

from fwbench.measure.trace import STEP_NAME, Span, Trace

# Host-side framework code recorded as CPU operators: the autograd engine's bookkeeping and
# torch.compile's runtime wrappers. Their own time is host overhead; the operators they call
# are counted as operators.
_HOST_OPS = re.compile(r"^(autograd::engine::|Torch-Compiled Region|TorchDynamo|Pregraph bytecode"
                       r"|AOTDispatcher|CompiledFunction(Backward)?$|ProfilerStep)")
_DEVICE_CATEGORIES = {"kernel", "gpu_memcpy", "gpu_memset"}


def capture(step, synchronize, *, steps: int, device: str, workdir: str) -> Trace:
    """Run ``steps`` steps under torch.profiler and return what it recorded.

    Usage::

        trace = capture(backend.step(), backend.synchronize, steps=6, device="cpu",
                        workdir=tmp)
    """
    activities = [ProfilerActivity.CPU]
    if device == "cuda":
        activities.append(ProfilerActivity.CUDA)
    with profile(activities=activities) as prof:
        for _ in range(steps):
            with record_function(STEP_NAME):
                step()
                synchronize()
    path = os.path.join(workdir, "trace.json")
    prof.export_chrome_trace(path)
    with open(path) as f:
        events = json.load(f).get("traceEvents", [])
    return read_trace(events, device=device)


def read_trace(events: list[dict], *, device: str) -> Trace:
    """The neutral trace of a Chrome trace's complete ("X") events (timestamps in µs)."""
    ops_by_id: dict[int, str] = {}
    for e in events:
        if e.get("ph") == "X" and e.get("cat") == "cpu_op":
            ext = (e.get("args") or {}).get("External id")
            if ext is not None:
                ops_by_id[ext] = e["name"]
    steps, spans = [], []
    for e in events:
        if e.get("ph") != "X" or "dur" not in e:
            continue
        name, category = e.get("name", ""), e.get("cat", "")
        start = float(e["ts"]) * 1e3
        end = start + float(e["dur"]) * 1e3
        lane = f"{e.get('pid')}/{e.get('tid')}"
        if category == "user_annotation" and name == STEP_NAME:
            steps.append((start, end))
        elif category == "cpu_op":
            kind = "host" if _HOST_OPS.match(name) else "op"
            spans.append(Span(lane, start, end, name, kind, name))
        elif category in _DEVICE_CATEGORIES:
            ext = (e.get("args") or {}).get("External id")
            op_type = "Memcpy" if category != "kernel" else ops_by_id.get(ext, name)
            spans.append(Span(lane, start, end, name, "kernel", op_type))
        else:
            spans.append(Span(lane, start, end, name, "host", name))
    steps.sort()
    notes = []
    if device == "cuda" and not any(s.kind == "kernel" for s in spans):
        notes.append("torch.profiler recorded no CUDA kernel (CUPTI unavailable?): the "
                     "breakdown falls back to host-side operator time")
    return Trace("pytorch", device, f"torch.profiler {torch.__version__}", steps, spans, notes)
