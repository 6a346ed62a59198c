"""How much of a pair's spread the host adds, and how much taking turns would remove: pairs of
trials run as the pipeline runs them (one framework's process after the other's) against pairs
whose two processes are alive together and time their windows in turn.

    python benchmarks/interleaved_pairs.py [--config config.yaml] [--pairs 8] [--cells lenet5]
                                           [--rewarm 2]

For every comparison of the config's plan (throughput cells, CPU), each pair k runs twice, in an
order that swaps with k:

- sequential: the two frameworks' fresh processes one after the other, as trial k of a cell's
  two frameworks run in the pipeline; each times ``WINDOWS`` windows back to back;
- interleaved: both fresh processes started together, each waiting once built; then they time
  their windows in turn, in an order drawn afresh for every round from ``--seed`` (A B, B A,
  B A, A B, ...), so both sample the host's speed over the same seconds (what Abedi and Brecht,
  ICPE 2017, call randomized multiple interleaved trials). The waiting process's CPU time and
  context switches during each window, and each window's first steps one by one, are kept
  (``Side``; ``benchmarks/aa_pairs.py`` prints them).

Each process is one trial's: the trial's settings, confined to its threads' processors by
fwbench.measure.child.load_backend (so the two processes of an interleaved pair share them, and
the one waiting for its turn uses none), its step timed by fwbench.measure.harness.measure. A
window is one measure call on the trial's schedule: the first warms up as the cell's trials do
(``warmup.max``, none calibrated here), later ones ``--rewarm`` untimed steps, as the other
process has since run on the processor; those steps are timed one by one, so the re-warm after a
switch is measured, not assumed. A side's value is its throughput, the mean time per step over every
timed block of its windows.

It prints, per comparison, three readings of the pairs: the sequential pairs' first windows
(a trial as it runs now times one), their ``WINDOWS`` windows (a trial timing that much longer)
and the interleaved pairs' windows. For each: the geometric mean PyTorch/TensorFlow ratio, the
standard deviation of the per-pair log ratios (the paired t interval's width follows it), the
interval's half-width at the family's level for this many pairs, and the design's wall time per
pair; then how many interleaved pairs give the interval of that many pairs as trials run now.
Where the interleaved ratio differs from the sequential one over as many windows, taking turns
changes what is measured; where one window's differs from all of them, the steps have not settled
within a trial's timed window.

Then the two conditions of the three (docs/statistics.md, "Pairs that take turns") that this
benchmark decides, per comparison: the interleaved ratio is **equivalent** to the sequential one
over as many windows (their per-pair log ratios' difference, both measured in pair k, read by the
primary analysis at the family's level within the plan's margin), and the interleaved **spread is
smaller** than a trial's now. The first condition, A/A ratios within 2 % of 1, is
``benchmarks/aa_pairs.py``'s.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # fwbench from this work tree

from fwbench.plan.config import load  # noqa: E402
from fwbench.plan.sweep import Plan  # noqa: E402

WINDOWS = 4  # timed windows per process
REWARM = 2  # untimed steps before every window after the first, unless --rewarm says


# --- one process: one side of a pair --------------------------------------------------------

def side(settings: dict, rewarm: int) -> None:
    """Build the trial's step, say `ready`, then time one window per `go` read from stdin and
    answer each with its blocks' [ns, steps]. The protocol has the real stdout to itself."""
    protocol = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # whatever the frameworks print goes to stderr
    from fwbench.measure.child import load_backend, start
    from fwbench.measure.harness import measure, trial_schedule
    from fwbench.measure.trial import with_warmup

    checked = with_warmup(start(settings))  # thread variables before any framework import
    backend, _ = load_backend(checked)  # confined, as a trial is
    step = backend.step()
    schedule = trial_schedule(checked)
    print("ready", file=protocol)
    for line in sys.stdin:
        if line.strip() != "go":
            break
        with backend.device_scope():
            m = measure(step, backend.synchronize, schedule)
        schedule = dataclasses.replace(schedule, warmup=rewarm)
        steps = [m.cold_start_ns, *m.warmup_ns]  # the first after a switch, one by one
        print(json.dumps({"block": [sum(m.block_ns), m.block_size * len(m.block_ns)],
                          "rewarm_ns": steps}), file=protocol)


class Side:
    """A side's fresh process, driven window by window."""

    def __init__(self, settings: dict, rewarm: int = REWARM):
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--side", json.dumps(settings), "--rewarm", str(rewarm)],
            cwd=ROOT, text=True,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
        self.windows: list[list[int]] = []  # [ns, steps] of each window's blocks
        self.rewarm_ns: list[list[int]] = []  # each window's first steps, one by one
        self.waiting: list[tuple[float, int]] = []  # (CPU ms, context switches) while waiting

    def ready(self) -> None:
        if self.proc.stdout.readline().strip() != "ready":
            raise SystemExit(f"a side exited before it was built ({self.proc.wait()})")

    def window(self, waiting: Side | None = None) -> None:
        """Time one window; ``waiting``: the other live side, whose use of the processors
        meanwhile is recorded (it should be none)."""
        before = waiting.usage() if waiting else None
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()
        answer = self.proc.stdout.readline()
        if not answer:
            raise SystemExit(f"a side exited in a window ({self.proc.wait()})")
        if waiting:
            after = waiting.usage()
            waiting.waiting.append((after[0] - before[0], after[1] - before[1]))
        window = json.loads(answer)
        self.windows.append(window["block"])
        self.rewarm_ns.append(window["rewarm_ns"])

    def usage(self) -> tuple[float, int]:
        """CPU milliseconds and context switches of the process's threads so far (/proc)."""
        proc = Path(f"/proc/{self.proc.pid}")
        stat = (proc / "stat").read_text().rpartition(")")[2].split()
        ticks = int(stat[11]) + int(stat[12])  # utime, stime: every thread's
        switches = sum(int(line.split()[1]) for task in proc.glob("task/*")
                       for line in (task / "status").read_text().splitlines()
                       if "ctxt_switches" in line)  # voluntary and not, per thread
        return ticks * 1000 / os.sysconf("SC_CLK_TCK"), switches

    def close(self) -> list[list[int]]:
        """The windows' [ns, steps]; the process ends."""
        self.proc.stdin.close()
        self.proc.wait()
        return self.windows


def sequential(first: dict, second: dict, rng: random.Random,
               rewarm: int = REWARM) -> list[Side]:
    """[first, second] sides, one process after the other."""
    sides = []
    for settings in (first, second):
        s = Side(settings, rewarm)
        s.ready()
        for _ in range(WINDOWS):
            s.window()
        s.close()
        sides.append(s)
    return sides


def interleaved(first: dict, second: dict, rng: random.Random,
                rewarm: int = REWARM) -> list[Side]:
    """[first, second] sides, both processes alive, timing their windows in turn, in an
    order drawn afresh for every round (not a fixed A B A B)."""
    sides = [Side(first, rewarm), Side(second, rewarm)]
    for s in sides:
        s.ready()
    for _ in range(WINDOWS):
        a, b = rng.sample(sides, 2)
        a.window(waiting=b)
        b.window(waiting=a)
    for s in sides:
        s.close()
    return sides


DESIGNS = {"sequential": sequential, "interleaved": interleaved}


# --- the comparison ------------------------------------------------------------------------

def comparisons(plan: Plan, only: list[str]) -> dict[str, dict[str, dict]]:
    """{pair_id: {framework: first trial's settings}} of each CPU throughput comparison."""
    chosen: dict[str, dict[str, dict]] = {}
    for trial in plan.trials:
        cell = trial.cell
        if cell.experiment != "throughput" or cell.device != "cpu":
            continue
        if only and not any(part in cell.id for part in only):
            continue
        chosen.setdefault(cell.pair_id, {}).setdefault(
            cell.framework, plan.trial_settings(trial).to_dict())
    return {k: v for k, v in chosen.items() if set(v) == {"pytorch", "tensorflow"}}


def per_step(windows: list[list[int]]) -> float:
    """Seconds per step over the windows' blocks."""
    return sum(ns for ns, _ in windows) / sum(steps for _, steps in windows) / 1e9


# What each row reads of a pair's windows: the trial as it runs now times one window.
ROWS = {
    "sequential, first window (as a trial now)": ("sequential", 1),
    f"sequential, {WINDOWS} windows": ("sequential", WINDOWS),
    f"interleaved, {WINDOWS} windows": ("interleaved", WINDOWS),
}


def main(config_path: str, pairs: int, only: list[str], seed: int, rewarm: int) -> int:
    config = load(config_path)
    rng = random.Random(seed)
    print(f"seed {seed}: the order of each interleaved round; {rewarm} re-warm steps",
          file=sys.stderr)
    plan = Plan.from_config(config)
    family = len(comparisons(plan, []))
    chosen = comparisons(plan, only)
    if not chosen:
        raise SystemExit("no CPU throughput comparison matches; see --cells")
    ratios = {(pid, row): [] for pid in chosen for row in ROWS}
    walls = {(pid, d): 0.0 for pid in chosen for d in DESIGNS}
    rewarms = {pid: [] for pid in chosen}  # first steps after a switch / steady, interleaved
    for k in range(pairs):
        for pair_id, sides in chosen.items():
            order = ["pytorch", "tensorflow"][:: 1 if k % 2 == 0 else -1]
            designs = list(DESIGNS)[:: 1 if (k // 2) % 2 == 0 else -1]
            for design in designs:
                t0 = time.perf_counter()
                ran = DESIGNS[design](*(sides[f] for f in order), rng, rewarm)
                windows = {f: side.windows for f, side in zip(order, ran)}
                walls[pair_id, design] += time.perf_counter() - t0
                for row, (of, n) in ROWS.items():
                    if of == design:
                        ratios[pair_id, row].append(per_step(windows["pytorch"][:n])
                                                    / per_step(windows["tensorflow"][:n]))
                if design == "interleaved":
                    rewarms[pair_id] += rewarm_profile(ran)
            print(f"pair {k + 1}/{pairs} {pair_id}: PyTorch/TensorFlow "
                  + ", ".join(f"{row} {ratios[pair_id, row][-1]:.3f}" for row in ROWS),
                  file=sys.stderr, flush=True)
    statistics_plan = config["statistics"]
    return report(chosen, ratios, walls, rewarms, pairs, family,
                  statistics_plan["confidence"], statistics_plan["rope"])


def rewarm_profile(sides: list[Side]) -> list[list[float]]:
    """Each window's first steps after a switch (every window but a process's first) over the
    side's steady step: the mean per step of its timed blocks."""
    profiles = []
    for s in sides:
        steady = per_step(s.windows) * 1e9
        profiles += [[ns / steady for ns in steps] for steps in s.rewarm_ns[1:]]
    return profiles


def report(chosen, ratios, walls, rewarms, pairs: int, family: int, confidence: float,
           rope: float) -> int:
    from scipy import stats

    from fwbench.analysis.comparisons import compare_paired

    level = 1 - (1 - confidence) / family
    t = stats.t.ppf(1 - (1 - level) / 2, pairs - 1)
    print(f"PyTorch/TensorFlow throughput ratio, {pairs} pairs per design and comparison; SD: "
          f"of the per-pair log ratios; half-width: the paired t interval's at {level:.4f} "
          f"(family of {family}); s/pair: wall time of the design's pair")
    print(f"{'comparison':58s} {'pairs read as':42s} {'ratio':>6s} {'SD':>6s} "
          f"{'half-width':>10s} {'s/pair':>7s}")
    first, windows, turns = ROWS
    held = {"equivalent": [], "smaller": []}
    for pair_id in chosen:
        sd = {}
        for row, (design, _) in ROWS.items():
            logs = [math.log(r) for r in ratios[pair_id, row]]
            sd[row] = statistics.stdev(logs)
            print(f"{pair_id:58s} {row:42s} {math.exp(statistics.fmean(logs)):6.3f} "
                  f"{sd[row]:6.3f} {math.expm1(t * sd[row] / math.sqrt(pairs)):10.1%} "
                  f"{walls[pair_id, design] / pairs:7.1f}")
        shrink = sd[turns] / sd[first]
        print(f"{'':58s} SD {turns} / {first}: {shrink:.2f}, so about "
              f"{max(2, math.ceil(pairs * shrink ** 2))} such pairs for the interval of {pairs} "
              f"trials' pairs as they run now")
        # Does taking turns measure the same ratio? Pair k's two designs ran back to back.
        shift = compare_paired([math.log(a / b) for a, b in zip(ratios[pair_id, turns],
                                                                 ratios[pair_id, windows])],
                               family_size=family, confidence=confidence, rope=rope,
                               names=("interleaved_lower", "interleaved_higher"))
        held["equivalent"].append(shift["verdict"] == "equivalent")
        held["smaller"].append(shrink < 1)
        print(f"{'':58s} {turns} / {windows}: {shift['ratio']:.3f}, equivalence interval "
              f"[{shift['equivalence_ci_low']:.3f}, {shift['equivalence_ci_high']:.3f}] "
              f"against [{shift['rope_low']:.3f}, {shift['rope_high']:.3f}]: {shift['verdict']}")
        positions = [statistics.median(r[i] for r in rewarms[pair_id] if len(r) > i)
                     for i in range(max(map(len, rewarms[pair_id]), default=0))]
        print(f"{'':58s} re-warm, each step after a switch / steady step (median): "
              + " ".join(f"{r:.2f}" for r in positions))
    print(f"conditions (declared in docs/statistics.md before measuring): the interleaved ratio "
          f"equivalent to the sequential one in {sum(held['equivalent'])} of {len(chosen)} "
          f"comparisons, its spread smaller in {sum(held['smaller'])} of {len(chosen)}; taking "
          f"turns becomes the primary design only if both hold in every comparison and "
          f"benchmarks/aa_pairs.py's A/A ratios lie within 2 % of 1")
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=str(ROOT / "config.yaml"))
    parser.add_argument("--pairs", type=int, default=8, help="pairs per design and comparison")
    parser.add_argument("--cells", nargs="*", default=[],
                        help="only comparisons whose id contains one of these (e.g. lenet5)")
    parser.add_argument("--seed", type=int, default=20261128,
                        help="seed of the order of each interleaved round (printed)")
    parser.add_argument("--rewarm", type=int, default=REWARM,
                        help="untimed steps before every window after a process's first, "
                             "each timed one by one (the re-warm after a switch)")
    parser.add_argument("--side", help=argparse.SUPPRESS)  # one side: a trial's settings
    args = parser.parse_args()
    if args.side:
        side(json.loads(args.side), args.rewarm)
        sys.exit(0)
    if args.pairs < 2:
        parser.error(f"--pairs must be at least 2 for a deviation, got {args.pairs}")
    sys.exit(main(args.config, args.pairs, args.cells, args.seed, args.rewarm))
