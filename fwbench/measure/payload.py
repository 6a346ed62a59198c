"""What a trial's child returns: its payload, and the records of a distributed trial's ranks.

Both cross a process boundary as JSON (the child's outcome), so both are typed records
(fwbench.plan.contract.Record), checked where they are made and where they are read: a bad
value fails there with one ResultError naming the field. The settings a trial is measured
under are the plan's (fwbench.plan.contract.TrialSettings). Framework-free.

Usage::

    payload = TrialPayload(iteration_ns=[...], details={"steps": 600})   # in the child
    TrialPayload.from_dict(outcome.payload).iteration_ns                 # in the parent
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fwbench.errors import ResultError
from fwbench.plan.contract import Record, TrialSettings, bounded


@dataclass(frozen=True)
class TrialPayload(Record):
    """What a trial's child returns: the fields every experiment reports, and its own beside them
    (``details``). A field it did not get to is its default: nothing measured."""

    WHAT = "trial payload"
    ERROR = ResultError

    cold_start_ns: int | None = bounded(None, minimum=0)
    warmup_ns: list[int] = field(default_factory=list)
    warmup_steady: bool | None = None
    iteration_ns: list[int] = field(default_factory=list)
    stop_reason: str | None = None
    block_size: int = bounded(0, minimum=0)
    block_ns: list[int] = field(default_factory=list)
    markers_ns: dict[str, int] = field(default_factory=dict)
    energy_mj: dict | None = None
    settings_in_force: dict = field(default_factory=dict)
    versions: dict = field(default_factory=dict)
    peak_rss_bytes: int | None = bounded(None, minimum=0)
    peak_memory: dict | None = None
    # What the experiment adds (epochs, ranks, pilot blocks, …): the result's ``details``.
    details: dict = field(default_factory=dict)
    # The child's part of the trial's timeline (wall clock, ns); the worker takes it out.
    timeline_ns: dict[str, int] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, d, what: str | None = None) -> TrialPayload:
        """A payload from its JSON; every key that is not a field is a detail."""
        known = {k: v for k, v in d.items() if k in _PAYLOAD_FIELDS}
        return super().from_dict(
            {**known, "details": {k: v for k, v in d.items() if k not in _PAYLOAD_FIELDS}},
            what)

    def to_dict(self) -> dict:
        """The payload as JSON, its details beside the fields (what ``from_dict`` reads)."""
        d = super().to_dict()
        details = d.pop("details")
        return {**d, **details}


_PAYLOAD_FIELDS = [name for name in TrialPayload.__dataclass_fields__ if name != "details"]


@dataclass(frozen=True)
class RankJob(Record):
    """What a rank process of a distributed trial is started with: the trial's settings, its
    rank, whether it probes the synchronized gradient first (tests), and the folder where the
    ranks meet before they exit (fwbench.measure.distributed)."""

    WHAT = "rank job"
    settings: TrialSettings
    rank: int = bounded(minimum=0)
    probe: bool = False
    leave_dir: str | None = None


@dataclass(frozen=True)
class RankRecord(Record):
    """What one rank of a distributed trial measured, returned to its driver."""

    WHAT = "rank record"
    ERROR = ResultError
    rank: int = bounded(minimum=0)
    measurement: dict = field(default_factory=dict)  # the harness's RankMeasurement, as JSON
    energy_mj: dict | None = None
    settings_in_force: dict = field(default_factory=dict)
    versions: dict = field(default_factory=dict)
    peak_memory: dict = field(default_factory=dict)
    peak_rss_bytes: int | None = bounded(None, minimum=0)
    probe: object = None                             # the probed gradient (tests), or None
