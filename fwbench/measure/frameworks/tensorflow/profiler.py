"""TensorFlow's profiler (tf.profiler.experimental) over a few steps, read back as a
framework-neutral trace.

The mirror image of frameworks/pytorch/profiler.py: ``capture`` runs the steps under the
profiler, each inside a ``fwbench_step`` trace annotation that ends with a synchronization, lets
the profiler write its XSpace (``*.xplane.pb``) to a temporary folder, and turns its events into
``fwbench.measure.trace.Span``s.

Which XSpace events are operators: a graph operator executed by tf.function runs as an event named
``<node name>:<op type>`` on a compute thread; an eager operator runs as ``KernelAndDevice…::Run``
under the ``EagerExecute`` event that names it (stat ``eager_op``, ``is_func`` 0); an XLA
executable runs its instructions as events with an ``hlo_op`` stat. On a GPU, kernels and copies
are events on the device plane's ``Stream`` lines, named by their ``tf_op`` or ``hlo_op`` stat.
"""

from __future__ import annotations

import glob
import os
import re

import tensorflow as tf

from fwbench.measure.trace import STEP_NAME, Span, Trace

_GRAPH_OP = re.compile(r"^[^\s:]+:([A-Za-z_][A-Za-z0-9_]*)$")
_EAGER_KERNEL = re.compile(r"^KernelAndDevice\w*::Run$")
_FUNCTION_CALL = re.compile(r"^__(inference|forward|backward)_")


def capture(step, synchronize, *, steps: int, device: str, workdir: str) -> Trace:
    """Run ``steps`` steps under the TensorFlow profiler and return what it recorded.

    Usage::

        trace = capture(backend.step(), backend.synchronize, steps=6, device="cpu",
                        workdir=tmp)
    """
    options = tf.profiler.experimental.ProfilerOptions(
        host_tracer_level=2, python_tracer_level=0,
        device_tracer_level=1 if device == "cuda" else 0)
    tf.profiler.experimental.start(workdir, options=options)
    try:
        for i in range(steps):
            with tf.profiler.experimental.Trace(STEP_NAME, step_num=i, _r=1):
                step()
                synchronize()
    finally:
        tf.profiler.experimental.stop()
    files = sorted(glob.glob(os.path.join(workdir, "**", "*.xplane.pb"), recursive=True))
    if not files:
        raise FileNotFoundError(f"the TensorFlow profiler wrote no *.xplane.pb under {workdir}")
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    space = xplane_pb2.XSpace()
    with open(files[-1], "rb") as f:
        space.ParseFromString(f.read())
    return read_space(space, device=device)


def _stats(event, plane) -> dict:
    out = {}
    for s in event.stats:
        name = plane.stat_metadata[s.metadata_id].name
        which = s.WhichOneof("value")
        value = getattr(s, which) if which else None
        if which == "ref_value":
            value = plane.stat_metadata[value].name
        out[name] = value
    return out


def read_space(space, *, device: str) -> Trace:
    """The neutral trace of an XSpace proto (``tensorflow.tsl.profiler.protobuf.xplane_pb2``)."""
    steps, spans = [], []
    for plane in space.planes:
        on_device = plane.name.startswith("/device:GPU")
        if not (on_device or plane.name == "/host:CPU"):
            continue
        for line in plane.lines:
            if on_device and not line.name.startswith("Stream"):
                continue  # derived lines (TensorFlow Ops, XLA Ops, Steps) repeat the streams
            base_ns = float(line.timestamp_ns)
            lane = f"{plane.name}/{line.id}"
            events = sorted(line.events, key=lambda e: (e.offset_ps, -e.duration_ps))
            stack: list[tuple[float, dict]] = []  # (end, stats) of enclosing events
            for e in events:
                name = plane.event_metadata[e.metadata_id].name
                start = base_ns + e.offset_ps / 1e3
                end = start + e.duration_ps / 1e3
                stats = _stats(e, plane)
                while stack and start >= stack[-1][0]:
                    stack.pop()
                enclosing = next((s for _, s in reversed(stack) if "eager_op" in s), {})
                stack.append((end, stats))
                if on_device:
                    op = stats.get("tf_op") or stats.get("hlo_op") or name
                    op_type = "Memcpy" if "memcpy" in name.lower() else _op_type(str(op))
                    spans.append(Span(lane, start, end, name, "kernel", op_type))
                elif name == STEP_NAME:
                    steps.append((start, end))
                elif "hlo_op" in stats:
                    spans.append(Span(lane, start, end, name, "op", str(stats["hlo_op"])))
                elif (m := _GRAPH_OP.match(name)) and not _FUNCTION_CALL.match(m.group(1)):
                    spans.append(Span(lane, start, end, name, "op", m.group(1)))
                elif _EAGER_KERNEL.match(name) and enclosing and not enclosing.get("is_func"):
                    spans.append(Span(lane, start, end, name, "op", str(enclosing["eager_op"])))
                else:
                    spans.append(Span(lane, start, end, name, "host", name))
    steps.sort()
    notes = []
    if device == "cuda" and not any(s.kind == "kernel" for s in spans):
        notes.append("the TensorFlow profiler recorded no GPU kernel (CUPTI unavailable?): the "
                     "breakdown falls back to host-side operator time")
    return Trace("tensorflow", device, f"tf.profiler.experimental {tf.__version__}", steps,
                 spans, notes)


def _op_type(tf_op: str) -> str:
    """"model/conv1/Conv2D:Conv2D" -> "Conv2D"; a name without a type is kept as it is."""
    return tf_op.rsplit(":", 1)[-1] if ":" in tf_op else tf_op
