"""Which rank of a distributed job a trace is, from Kineto's `distributedInfo` header.

torch.profiler writes `distributedInfo` when torch.distributed is initialised: `rank`,
`world_size`, `backend` and, in torch 2.x, `pg_count` and `pg_config` (each process group's
name, description, backend_config and ranks). A trace without it is no rank of a job: every
field is None then, never 0, so rank 0 of a job is never confused with a single-GPU trace.
Which traces are the ranks of one job is decided across traces, in the database (view _jobs):
this module only reads what each trace says.
"""

import re
from dataclasses import dataclass
# `backend_config` entries, e.g. 'cpu:gloo,cuda:nccl'.
_DEVICE_BACKEND = re.compile(r"(\w+)\s*:\s*(\w+)")


@dataclass(frozen=True)
class RankInfo:
    rank: int = None
    world_size: int = None
    backend: str = None
    # The ranks of the default process group ('0', 'default_pg'), e.g. '0,1': ranks of one job
    # agree on it; None where the trace lists no groups.
    default_group: str = None


NO_RANK = RankInfo()


def rank_info(header):
    """The RankInfo of a trace whose header dict is `header`."""
    info = header.get("distributedInfo")
    if not isinstance(info, dict):
        return NO_RANK
    rank, world_size = _whole(info.get("rank")), _whole(info.get("world_size"))
    if rank is None:
        return NO_RANK
    if world_size is not None and (world_size < 1 or rank >= world_size):
        world_size = None  # a size that cannot hold the rank says nothing
    return RankInfo(rank, world_size, _backend(info), _default_group(info))


def base_time_ns(header):
    """Kineto's `baseTimeNanoseconds`: an event's time since the epoch is this plus its ts (newer
    Kineto writes ts from a clock of its own); None where not written (ts is then the epoch's)."""
    return _whole(header.get("baseTimeNanoseconds"))


def _whole(value):
    """A non-negative whole number from a JSON value (Kineto writes ints; a digit string is
    taken too), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return None


def _default_group(info):
    """The default process group's ranks, sorted and comma-joined ('0,1,2,3'), else None."""
    for group in info.get("pg_config") or []:
        if not isinstance(group, dict):
            continue
        if str(group.get("pg_name")) == "0" or group.get("pg_desc") == "default_pg":
            ranks = group.get("ranks")
            if isinstance(ranks, list) and all(_whole(r) is not None for r in ranks):
                return ",".join(str(r) for r in sorted(_whole(r) for r in ranks))
            return None
    return None


def _backend(info):
    """The backend as written ('nccl', 'gloo', ...). torch writes 'undefined' for a default group
    with a backend per device ('cpu:gloo,cuda:nccl'): the GPU's backend is the one that matters here."""
    backend = info.get("backend")
    backend = backend.strip() if isinstance(backend, str) and backend.strip() else None
    if backend not in (None, "undefined"):
        return backend
    for group in info.get("pg_config") or []:
        config = group.get("backend_config") if isinstance(group, dict) else None
        if isinstance(config, str):
            by_device = dict(_DEVICE_BACKEND.findall(config))
            gpu = by_device.get("cuda") or by_device.get("xpu") or by_device.get("hip")
            if gpu:
                return gpu
    return backend
