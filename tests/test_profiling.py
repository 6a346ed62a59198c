"""Where the time goes: operator classes, the neutral breakdown, both profilers' readers, and
one real profiled run per framework on the CPU (not a trial: never read as one).

The GPU paths (CUDA kernels in torch.profiler's trace, the device plane of TensorFlow's XSpace)
are read from hand-built traces in the frameworks' own formats: no GPU is reachable here.
"""

import json

import pytest

from fwbench.analysis.profiles import collect_profiles
from fwbench.errors import ResultError
from fwbench.measure import profiling
from fwbench.measure.results import load_trial
from fwbench.measure.trace import CATEGORIES, HOST, Span, Trace, breakdown, classify
from fwbench.plan.config import validate
from fwbench.plan.contract import TrialSettings
from fwbench.plan.sweep import Plan

# Real operator names from both frameworks' profilers (lenet5 and resnet18, eager and graph,
# XLA on the CPU) and common CUDA kernel names, with their class.
NAMES = {
    "convolution": ["aten::conv2d", "aten::mkldnn_convolution", "aten::convolution_backward",
                    "ConvolutionBackward0", "Conv2D", "_FusedConv2D", "Conv2DBackpropFilter",
                    "Conv2DBackpropInput", "DepthwiseConv2dNative", "convolution.3",
                    "sm80_xmma_fprop_implicit_gemm_tf32f32", "sm80_xmma_dgrad_implicit_gemm"],
    "matmul": ["aten::addmm", "aten::mm", "AddmmBackward0", "aten::linear", "MatMul",
               "_FusedMatMul", "BatchMatMulV2", "MatMul_1.10", "ampere_sgemm_128x64_tn"],
    "normalization": ["aten::native_batch_norm", "aten::batch_norm", "FusedBatchNormV3",
                      "FusedBatchNormGradV3", "aten::layer_norm"],
    "elementwise": ["aten::relu", "aten::add_", "aten::threshold_backward", "ReluBackward0",
                    "Relu", "ReluGrad", "BiasAdd", "BiasAddGrad", "Mul",
                    "ResourceApplyKerasMomentum", "broadcast_maximum_fusion.2", "wrapped_add.9",
                    "void at::native::vectorized_elementwise_kernel<4, add>"],
    "memory": ["aten::copy_", "aten::empty", "aten::t", "aten::to", "aten::as_strided",
               "torch::autograd::AccumulateGrad", "ReadVariableOp", "AssignVariableOp",
               "Transpose", "Identity", "transpose_copy_fusion.1", "copy.21", "wrapped_iota",
               "Memcpy"],
    "fused": ["## Call CompiledFxGraph fkc77ivk ##", "triton_poi_fused_relu_0",
              "cpp_fused_add_0"],
    "other": ["aten::max_pool2d_with_indices", "MaxPool", "MaxPoolGrad", "aten::nll_loss",
              "Sum", "wrapped_reduce-window.2"],
}


@pytest.mark.parametrize("cls", sorted(NAMES))
def test_operators_of_both_frameworks_fall_in_the_same_classes(cls):
    assert {name: classify(name) for name in NAMES[cls]} == dict.fromkeys(NAMES[cls], cls)


def _span(lane, start, end, name, kind="op"):
    return Span(lane, start, end, name, kind, name)


def test_breakdown_counts_self_time_by_class_and_the_rest_as_host_overhead():
    # One 100 ns step: conv2d 10..60 wrapping mkldnn_convolution 20..50, relu 70..80; the
    # autograd engine's bookkeeping 60..90 is host code, not an operator.
    trace = Trace("pytorch", "cpu", "test", [(0, 100)], [
        _span("t", 10, 60, "aten::conv2d"), _span("t", 20, 50, "aten::mkldnn_convolution"),
        _span("t", 60, 90, "autograd::engine::evaluate_function: X", "host"),
        _span("t", 70, 80, "aten::relu"), _span("t", 150, 170, "aten::relu")])  # outside
    b = breakdown(trace)
    assert b["per_step_ns"]["convolution"] == 50
    assert b["per_step_ns"]["elementwise"] == 10
    assert b["per_step_ns"][HOST] == 40
    assert sum(b["share"].values()) == pytest.approx(1)
    assert b["top_ops"][0] == {"op": "aten::mkldnn_convolution", "class": "convolution",
                               "ns_per_step": 30}


def test_operators_overlapping_on_two_threads_are_scaled_to_the_time_they_cover():
    trace = Trace("tensorflow", "cpu", "test", [(0, 100)], [
        _span("a", 0, 60, "Conv2D"), _span("b", 20, 80, "MatMul")])
    b = breakdown(trace)
    assert b["overlap"] == pytest.approx(120 / 80)
    assert b["per_step_ns"]["convolution"] + b["per_step_ns"]["matmul"] == pytest.approx(80)
    assert b["per_step_ns"][HOST] == pytest.approx(20)
    assert any("overlapped" in n for n in b["notes"])


def test_on_a_gpu_host_overhead_is_the_device_idle():
    trace = Trace("pytorch", "cuda", "test", [(0, 100), (100, 200)], [
        _span("cpu", 0, 90, "aten::conv2d"),  # host-side operator spans do not count on a GPU
        Span("gpu", 30, 70, "implicit_convolve_sgemm", "kernel", "aten::cudnn_convolution"),
        Span("gpu", 130, 150, "Memcpy HtoD", "kernel", "Memcpy")])
    b = breakdown(trace)
    assert b["per_step_ns"]["convolution"] == 20 and b["per_step_ns"]["memory"] == 10
    assert b["per_step_ns"][HOST] == 70
    assert "device idle" in b["basis"]


def test_pytorch_trace_reader_names_each_gpu_kernel_by_its_launching_operator():
    from fwbench.measure.frameworks.pytorch.profiler import read_trace

    events = [
        {"ph": "X", "cat": "user_annotation", "name": "fwbench_step", "ts": 0, "dur": 100},
        {"ph": "X", "cat": "cpu_op", "name": "aten::addmm", "ts": 5, "dur": 20,
         "args": {"External id": 7}},
        {"ph": "X", "cat": "cpu_op", "name": "autograd::engine::evaluate_function: X",
         "ts": 30, "dur": 5},
        {"ph": "X", "cat": "kernel", "name": "sm90_xmma_gemm_f32f32", "ts": 40, "dur": 30,
         "args": {"External id": 7}},
        {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoD", "ts": 75, "dur": 5},
        {"ph": "i", "name": "instant"},
    ]
    trace = read_trace(events, device="cuda")
    assert trace.steps == [(0.0, 100_000.0)]
    kinds = {(s.name, s.kind, s.op_type) for s in trace.spans}
    assert ("sm90_xmma_gemm_f32f32", "kernel", "aten::addmm") in kinds
    assert ("autograd::engine::evaluate_function: X", "host",
            "autograd::engine::evaluate_function: X") in kinds
    b = breakdown(trace)
    assert b["per_step_ns"]["matmul"] == 30_000 and b["per_step_ns"]["memory"] == 5_000


def test_tensorflow_space_reader_keeps_stream_lines_and_reads_op_types():
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    from fwbench.measure.frameworks.tensorflow.profiler import read_space

    space = xplane_pb2.XSpace()
    host = space.planes.add(id=1, name="/host:CPU")
    gpu = space.planes.add(id=2, name="/device:GPU:0")

    def event(plane, line, name, start_ps, dur_ps, **stats):
        mid = len(plane.event_metadata) + 1
        plane.event_metadata[mid].id, plane.event_metadata[mid].name = mid, name
        e = line.events.add(metadata_id=mid, offset_ps=start_ps, duration_ps=dur_ps)
        for key, value in stats.items():
            sid = next((k for k, m in plane.stat_metadata.items() if m.name == key),
                       len(plane.stat_metadata) + 1)
            plane.stat_metadata[sid].id, plane.stat_metadata[sid].name = sid, key
            stat = e.stats.add(metadata_id=sid)
            if isinstance(value, str):
                stat.str_value = value
            else:
                stat.int64_value = value

    python = host.lines.add(id=1, name="python", timestamp_ns=0)
    event(host, python, "fwbench_step", 0, 100_000)
    event(host, python, "EagerExecute", 1_000, 20_000, eager_op="Relu", is_func=0)
    event(host, python, "KernelAndDeviceFunc::Run", 2_000, 10_000)
    compute = host.lines.add(id=2, name="tf_Compute", timestamp_ns=0)
    event(host, compute, "model/conv1/Conv2D:Conv2D", 30_000, 20_000)
    event(host, compute, "__inference_train_1:__inference_train_1", 55_000, 30_000)
    event(host, compute, "convolution.3", 60_000, 10_000, hlo_op="convolution.3")
    stream = gpu.lines.add(id=3, name="Stream #14(Compute)", timestamp_ns=0)
    event(gpu, stream, "volta_sgemm", 10_000, 40_000, tf_op="model/fc/MatMul:MatMul")
    derived = gpu.lines.add(id=4, name="TensorFlow Ops", timestamp_ns=0)
    event(gpu, derived, "MatMul", 10_000, 40_000)

    trace = read_space(space, device="cuda")
    ops = {(s.op_type, s.kind) for s in trace.spans}
    assert {("Relu", "op"), ("Conv2D", "op"), ("convolution.3", "op"),
            ("MatMul", "kernel")} <= ops
    assert ("__inference_train_1:__inference_train_1", "host") in ops  # a function call
    assert sum(s.kind == "kernel" for s in trace.spans) == 1  # the derived line is skipped
    assert trace.steps == [(0.0, 100.0)]
    assert breakdown(trace)["per_step_ns"]["matmul"] == pytest.approx(40)


# --- one real profiled run per framework ------------------------------------------------------

def _settings(tiny_config, framework, **cell):
    plan = Plan.from_config(validate({**tiny_config, "frameworks": [framework]}))
    params = plan.trial_settings(plan.trials[0]).to_dict()
    return TrialSettings.from_dict({**params, "cell": {**params["cell"], **cell},
                                    "profile_steps": 3})


@pytest.mark.parametrize("framework", ["pytorch", "tensorflow"])
def test_a_real_profile_is_written_and_read_back_but_never_as_a_trial(
        tmp_path, tiny_config, framework):
    out = tmp_path / "profile.json"
    result = profiling.run_profile(_settings(tiny_config, framework), out)
    assert result["status"] == "ok", result["message"]
    p = result["profile"]
    assert p["steps"] == 3 and p["unprofiled_ns_per_step"] > 0
    assert sum(p["share"].values()) == pytest.approx(1, abs=1e-6)
    # lenet5 inference: convolution and matrix-multiply operators, and some host overhead.
    assert p["per_step_ns"]["convolution"] > 0 and p["per_step_ns"]["matmul"] > 0
    assert 0 < p["share"][HOST] < 1
    assert p["top_ops"]
    assert p["profiler"].split()[0] in ("torch.profiler", "tf.profiler.experimental")
    table = collect_profiles([out])
    assert set(table["category"]) == set(CATEGORIES)
    assert (table["framework"] == framework).all()
    with pytest.raises(ResultError):
        load_trial(out)  # marked `kind: profile`: no trial reader accepts it
    assert json.loads(out.read_text())["kind"] == "profile"


def test_an_unsupported_ablation_cell_is_a_profile_with_its_reason(tmp_path, tiny_config):
    settings = _settings(tiny_config, "pytorch", profile="defaults+tf32")
    result = profiling.run_profile(settings, tmp_path / "profile.json")
    assert result["status"] == "unsupported" and "TF32" in result["message"]
    table = collect_profiles([tmp_path / "profile.json"])
    assert list(table["status"]) == ["unsupported"] and table["category"].isna().all()


@pytest.mark.gpu
@pytest.mark.parametrize("framework", ["pytorch", "tensorflow"])
def test_on_a_real_gpu_host_overhead_is_read_from_device_kernels(tmp_path, tiny_config, framework):
    """The GPU path, on an NVIDIA machine: `pytest -m gpu tests/test_profiling.py`."""
    import shutil

    if not shutil.which("nvidia-smi"):
        pytest.skip("no NVIDIA GPU here (nvidia-smi not found)")
    settings = _settings({**tiny_config, "devices": ["cuda"], "phases": ["train"]}, framework)
    result = profiling.run_profile(settings, tmp_path / "profile.json")
    if result["status"] == "unsupported":
        pytest.skip(result["message"])
    assert result["status"] == "ok", result["message"]
    p = result["profile"]
    assert "device idle" in p["basis"], p["notes"]
    assert p["per_step_ns"]["convolution"] > 0 and p["per_step_ns"]["matmul"] > 0
