"""Which rank of which job a trace is: Kineto's `distributedInfo` header, and the folder of the file.

torch.profiler writes `distributedInfo` when torch.distributed is initialised: `rank`,
`world_size`, `backend` and, in torch 2.x, `pg_count` and `pg_config` (each process group's
name, description, backend_config and ranks). A trace without it is no rank of a job: every
field is None then, never 0, so rank 0 of a job is never confused with a single-GPU trace.
"""

import re
from dataclasses import dataclass
from pathlib import Path

# A folder named for its rank (rank0/, rank_1/, rank-2/): the job is the folder above it.
_RANK_FOLDER = re.compile(r"rank[-_]?\d+", re.IGNORECASE)
# `backend_config` entries, e.g. 'cpu:gloo,cuda:nccl'.
_DEVICE_BACKEND = re.compile(r"(\w+)\s*:\s*(\w+)")


@dataclass(frozen=True)
class RankInfo:
    rank: int = None
    world_size: int = None
    backend: str = None
    job: str = None  # the folder holding the job's rank files (absolute path)


NO_RANK = RankInfo()


def rank_info(header, path):
    """The RankInfo of a trace whose header dict is `header`, loaded from `path`."""
    info = header.get("distributedInfo")
    if not isinstance(info, dict):
        return NO_RANK
    rank, world_size = _whole(info.get("rank")), _whole(info.get("world_size"))
    if rank is None:
        return NO_RANK
    if world_size is not None and (world_size < 1 or rank >= world_size):
        world_size = None  # a size that cannot hold the rank says nothing
    return RankInfo(rank, world_size, _backend(info), job_folder(path))


def job_folder(path):
    """The folder that holds a job's rank files: the file's own, or the one above a rank folder
    (a job written as rank0/trace.json, rank1/trace.json is one job)."""
    folder = Path(path).resolve().parent
    if _RANK_FOLDER.fullmatch(folder.name) and folder.parent != folder:
        folder = folder.parent
    return str(folder)


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
