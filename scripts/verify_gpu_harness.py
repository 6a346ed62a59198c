"""Verify the harness's CUDA path on a machine with an NVIDIA GPU and PyTorch.

    python scripts/verify_gpu_harness.py OUT_DIR [--model resnet18] [--batch 64]

1. Timing against a kernel of known duration: torch.cuda._sleep spins on the device for a
   given number of clock cycles. CUDA events time it first (the device's own clock); then
   fwbench.measure.harness.measure times it with the wait both backends use (the CUDA driver's
   cuCtxSynchronize on the primary context, fwbench.measure.cuda_driver), with
   torch.cuda.synchronize, and without synchronizing. Synchronized, the harness must agree with
   the events within 2% (plus 20 µs of launch and clock reads); unsynchronized it sees only the
   launch, which is what the sync is for. The empty-sync cost of each wait is recorded.
2. TensorFlow, where it is installed with a GPU: a chain of matmuls timed with the driver's
   wait and with tf.test.experimental.sync_devices must agree within the same tolerance, and
   their empty-sync costs are recorded (the cost the shared wait removes from TensorFlow).
3. A sweep through the trial path a workflow job takes (supervised child, telemetry sampler,
   result JSON): train and infer × eager and compiled × fp32, bf16 and fp16, for PyTorch and,
   where it sees a GPU, TensorFlow.

Writes OUT_DIR/summary.json (versions, checks, one line per trial) and OUT_DIR/trials/*.json.
Exit status 0 when every check passes and every trial ends ok, 1 otherwise, 2 without a GPU.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # fwbench from this work tree

from fwbench.measure import cuda_driver  # noqa: E402
from fwbench.measure.harness import Schedule, calibrate_sync, measure  # noqa: E402
from fwbench.measure.trial import run_trial  # noqa: E402
from fwbench.plan import config as fwconfig  # noqa: E402
from fwbench.plan.sweep import Plan  # noqa: E402

KERNEL_MS = 10.0
TOLERANCE = 0.02
SLACK_NS = 20_000


def known_kernel(torch) -> dict:
    """The harness against CUDA events on a spin kernel of about KERNEL_MS milliseconds."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def event_ms(cycles: int) -> float:
        torch.cuda.synchronize()
        start.record()
        torch.cuda._sleep(cycles)
        end.record()
        torch.cuda.synchronize()
        return start.elapsed_time(end)

    probe = 10_000_000
    event_ms(probe)  # the first launch loads the kernel
    cycles = int(probe * KERNEL_MS / statistics.median(event_ms(probe) for _ in range(5)))
    expected_ns = statistics.median(event_ms(cycles) for _ in range(20)) * 1e6

    def step():
        torch.cuda._sleep(cycles)

    def median_ns(synchronize) -> float:
        m = measure(step, synchronize, Schedule(warmup=12, iterations=20))
        torch.cuda.synchronize()
        return statistics.median(m.iteration_ns)

    driver_ns, torch_ns = median_ns(cuda_driver.context_synchronize), median_ns(
        torch.cuda.synchronize)
    unsynced_ns = median_ns(lambda: None)
    return {
        "cycles": cycles, "events_median_ns": expected_ns,
        "harness_median_ns": driver_ns, "harness_torch_synchronize_median_ns": torch_ns,
        "harness_unsynchronized_median_ns": unsynced_ns,
        "ratio": driver_ns / expected_ns,
        "agrees": all(_agrees(t, expected_ns) for t in (driver_ns, torch_ns)),
        "unsynchronized_sees_only_the_launch": unsynced_ns < 0.2 * expected_ns,
        "empty_sync_ns": {"cuda_driver": calibrate_sync(cuda_driver.context_synchronize),
                          "torch.cuda.synchronize": calibrate_sync(torch.cuda.synchronize)},
    }


def _agrees(measured_ns: float, expected_ns: float) -> bool:
    return abs(measured_ns - expected_ns) <= TOLERANCE * expected_ns + SLACK_NS


def tensorflow_gpu():
    """TensorFlow when it is installed and sees a GPU, else None."""
    try:
        import tensorflow as tf
    except ImportError:
        return None
    return tf if tf.config.list_physical_devices("GPU") else None


def tensorflow_waits(tf) -> dict:
    """TensorFlow's work timed with the shared driver wait against its own sync_devices."""
    with tf.device("/GPU:0"):
        a = tf.random.normal((4096, 4096))

        @tf.function
        def step():
            x = a
            for _ in range(8):
                x = tf.matmul(x, a) / 64.0
            return x

        def median_ns(synchronize) -> float:
            m = measure(step, synchronize, Schedule(warmup=12, iterations=20))
            tf.test.experimental.sync_devices()
            return statistics.median(m.iteration_ns)

        own_ns = median_ns(tf.test.experimental.sync_devices)
        driver_ns = median_ns(cuda_driver.context_synchronize)
        unsynced_ns = median_ns(lambda: None)
    return {
        "sync_devices_median_ns": own_ns, "driver_median_ns": driver_ns,
        "unsynchronized_median_ns": unsynced_ns, "ratio": driver_ns / own_ns,
        "agrees": _agrees(driver_ns, own_ns),
        "unsynchronized_sees_only_the_launch": unsynced_ns < 0.2 * own_ns,
        "empty_sync_ns": {"cuda_driver": calibrate_sync(cuda_driver.context_synchronize),
                          "tf.test.experimental.sync_devices":
                              calibrate_sync(tf.test.experimental.sync_devices)},
    }


def sweep_config(model: str, batch: int, frameworks: list[str]) -> dict:
    """The sweep as a validated config, so the trials are planned as a workflow plans them."""
    return fwconfig.validate({
        "run": "gpu-harness", "frameworks": frameworks, "devices": ["cuda"],
        "models": {model: {"input_shapes": [[3, 224, 224]]}}, "batch_sizes": [batch],
        "phases": ["train", "infer"], "modes": ["eager", "compiled"],
        "precisions": ["fp32", "bf16", "fp16"], "trials": 1, "iterations": 30,
        "warmup": {"min": 10, "max": 50}, "blocks": {"count": 3, "size": 10},
        "min_run_time_s": 0.5,
        "timeout_s": 600,
    })


def main(out_dir: str, model: str, batch: int) -> int:
    import torch

    if not torch.cuda.is_available():
        print("no CUDA device visible to PyTorch", file=sys.stderr)
        return 2
    out = Path(out_dir)
    (out / "trials").mkdir(parents=True, exist_ok=True)
    kernel = known_kernel(torch)
    print(f"known kernel: {json.dumps(kernel)}", file=sys.stderr)
    tf = tensorflow_gpu()
    waits = tensorflow_waits(tf) if tf else None
    print(f"TensorFlow waits: {json.dumps(waits)}", file=sys.stderr)
    frameworks = ["pytorch", "tensorflow"] if tf else ["pytorch"]
    plan = Plan.from_config(sweep_config(model, batch, frameworks))
    lines = []
    for trial in plan.trials:
        name = trial.cell.name
        result = run_trial(plan.trial_settings(trial), out / "trials" / f"{name}.json",
                           out / "trials" / f"{name}.env.json",
                           out / "trials" / f"{name}.telemetry.csv")
        times = result["iteration_ns"]
        line = {"cell": name, "status": result["status"], "message": result["message"][:300],
                "cold_start_ms": (result["cold_start_ns"] or 0) / 1e6,
                "median_ms": statistics.median(times) / 1e6 if times else None,
                "sync_ns": result["details"].get("sync_ns"),
                "settings_in_force": result["settings"]["in_force"]}
        print(json.dumps(line), file=sys.stderr)
        lines.append(line)
    summary = {
        "device": torch.cuda.get_device_name(0),
        "versions": {"torch": torch.__version__, "cuda": torch.version.cuda,
                     "cudnn": torch.backends.cudnn.version(),
                     "tensorflow": tf.__version__ if tf else "not installed or no GPU"},
        "known_kernel": kernel, "tensorflow_waits": waits, "trials": lines,
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
    checks = [kernel] + ([waits] if waits else [])
    passed = (all(c["agrees"] and c["unsynchronized_sees_only_the_launch"] for c in checks)
              and all(line["status"] == "ok" for line in lines))
    return 0 if passed else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir")
    parser.add_argument("--model", default="resnet18")
    parser.add_argument("--batch", type=int, default=64)
    args = parser.parse_args()
    sys.exit(main(args.out_dir, args.model, args.batch))
