"""fwbench/measure/supervisor.py and worker.py: every way a trial, or a rank of one, ends becomes
a status; the sweep goes on.

Each failure is provoked for real: a raised exception, os.abort(), an address-space limit hit by
a real PyTorch trial, a real trial that outlives its timeout, a rank left waiting for one that
failed.
"""

import ctypes
import json
import os
import subprocess
import sys
import tempfile
import time

import pytest

from fwbench.errors import Unsupported
from fwbench.measure.supervisor import Child, supervise, supervise_group
from fwbench.measure.worker import classify

HERE = "tests.test_supervisor"


# --- entries run in the child process ---------------------------------------------------

def returns(settings):
    return {"answer": settings["value"] * 2}


def raises(settings):
    raise ValueError("the model diverged")


def aborts(settings):
    os.abort()


def sleeps(settings):
    time.sleep(60)


def prints(settings):
    print("from Python", end="")                  # in Python's buffer: no newline
    ctypes.CDLL(None).printf(b" and from C")      # in C's stdio buffer (stdout is a pipe)
    return {}


def converts(settings):
    """A real tf.function: AutoGraph writes the converted source to a temporary file."""
    import tensorflow as tf

    @tf.function
    def double(x):
        return x * 2 if x.shape[0] else x

    value = int(double(tf.constant([21]))[0])
    return {"value": value, "tmp": tempfile.gettempdir(), "left": os.listdir(tempfile.gettempdir())}


def rank(settings):
    """One process of a group: ends as its settings say, after ``after`` seconds."""
    time.sleep(settings.get("after", 0))
    if settings["end"] == "raise":
        raise ValueError(f"rank {settings['rank']} failed")
    if settings["end"] == "abort":
        os.abort()
    if settings["end"] == "wait":
        time.sleep(120)
    return {"rank": settings["rank"], "variable": os.environ.get("RANK_VARIABLE")}


def allocates(settings):
    """A real PyTorch allocation far above the address-space limit."""
    import torch

    torch.ones(settings["elements"], dtype=torch.float32)


# --- tests -------------------------------------------------------------------------------

def run(entry, settings=None, **kwargs):
    kwargs.setdefault("timeout_s", 120)
    kwargs.setdefault("memory_limit_mb", None)
    return supervise(f"{HERE}:{entry}", settings or {}, **kwargs)


def test_ok_returns_the_payload():
    outcome = run("returns", {"value": 21})
    assert (outcome.status, outcome.payload, outcome.returncode) == ("ok", {"answer": 42}, 0)


def test_exception_is_an_error_with_its_message():
    outcome = run("raises")
    assert (outcome.status, outcome.returncode) == ("error", 1)
    assert outcome.message == "ValueError: the model diverged"


def test_abort_is_a_crash_named_by_its_signal():
    outcome = run("aborts")
    assert outcome.status == "crashed"
    assert "SIGABRT" in outcome.message and outcome.returncode < 0


def test_the_child_ends_without_teardown_and_loses_no_output(tmp_path):
    # The worker ends with os._exit once its outcome is written: what Python and C code still
    # held in their buffers reaches the log all the same.
    settings = tmp_path / "settings.json"
    settings.write_text("{}")
    buffered = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    proc = subprocess.run([sys.executable, "-m", "fwbench.measure.worker", f"{HERE}:prints",
                           str(settings), str(tmp_path / "outcome.json")],
                          capture_output=True, text=True, timeout=120, env=buffered)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "from Python and from C"
    outcome = json.loads((tmp_path / "outcome.json").read_text())
    assert outcome["status"] == "ok" and outcome["timeline_ns"]["child_imported"] > 0


def test_what_the_child_leaves_in_its_temporary_directory_is_removed():
    # The child ends without teardown, so AutoGraph's atexit clean-up never runs: before, every
    # TensorFlow trial left a file in /tmp.
    outcome = run("converts")
    assert outcome.status == "ok" and outcome.payload["value"] == 42
    assert any(name.startswith("__autograph") for name in outcome.payload["left"])
    assert outcome.payload["tmp"] != tempfile.gettempdir()
    assert not os.path.exists(outcome.payload["tmp"])


def test_timeout_kills_the_child():
    start = time.monotonic()
    outcome = run("sleeps", timeout_s=1.5)
    assert outcome.status == "timeout" and "timeout_s=1.5" in outcome.message
    assert time.monotonic() - start < 20


def test_address_space_limit_is_out_of_memory():
    # 64 GiB of float32 under a 6 GiB limit: the import fits, the allocation cannot.
    outcome = run("allocates", {"elements": 16 * 2**30}, memory_limit_mb=6144)
    assert outcome.status == "oom", outcome.message


def _group(*ends, grace_s=0.5):
    children = [Child(f"{HERE}:rank", {"rank": k, "end": end, "after": 0.3 * (end != "wait")},
                      {"RANK_VARIABLE": str(k)}) for k, end in enumerate(ends)]
    return supervise_group(children, grace_s=grace_s)


def test_a_group_runs_every_process_with_its_own_settings_and_environment():
    outcomes = _group("return", "return")
    assert [o.status for o in outcomes] == ["ok", "ok"]
    assert [o.payload for o in outcomes] == [{"rank": 0, "variable": "0"},
                                             {"rank": 1, "variable": "1"}]
    assert all(o.timeline_ns["child_started"] < o.timeline_ns["child_exited"] for o in outcomes)


def test_every_way_a_rank_ends_is_a_status_and_the_waiting_ones_are_killed():
    start = time.monotonic()
    outcomes = _group("return", "raise", "abort", "wait")
    assert [o.status for o in outcomes] == ["ok", "error", "crashed", "killed"]
    assert outcomes[1].message == "ValueError: rank 1 failed"
    assert "SIGABRT" in outcomes[2].message
    assert "another process" in outcomes[3].message and outcomes[3].returncode < 0
    assert time.monotonic() - start < 30  # the waiting rank did not sleep its 120 s


@pytest.mark.parametrize("exc, status", [
    (Unsupported("too small"), "unsupported"),
    (MemoryError(), "oom"),
    (RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB"), "oom"),
    (RuntimeError("[enforce fail at alloc_cpu.cpp:118] DefaultCPUAllocator: can't allocate memory"),
     "oom"),
    (type("ResourceExhaustedError", (Exception,), {})("OOM when allocating tensor"), "oom"),
    (KeyError("x"), "error"),
])
def test_classify(exc, status):
    assert classify(exc) == status
