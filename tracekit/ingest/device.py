"""Which GPU a trace ran on: vendor, name, architecture, and CUDA compute capability.

Kineto writes `deviceProperties` for CUDA and ROCm alike (2021's Kineto: `computeProperties`),
and ROCm fills `computeMajor`/`computeMinor` with HIP's numbers: an MI210 (gfx90a) says 9.0, as
Hopper does. So the vendor comes first (`gcnArchName` and the device name say AMD), the
compute capability is given for NVIDIA devices only, and an AMD device's architecture is its
gfx name. What the header leaves open, the events settle after the load (`DEVICE_FROM_EVENTS`).
"""

import re
from typing import NamedTuple, Optional

_AMD_NAME = re.compile(r"\b(AMD|Instinct|Radeon)\b|\bMI\d{3}", re.IGNORECASE)
_NVIDIA_NAME = re.compile(r"NVIDIA|Tesla|GeForce|Quadro|TITAN|\bRTX\b|\b[AHBL]\d{2,3}\b|\bGH200\b|\bGB200\b",
                          re.IGNORECASE)


class Device(NamedTuple):
    vendor: Optional[str]  # 'nvidia', 'amd' or None (unknown, or no GPU)
    name: Optional[str]  # device 0's name; None when empty or absent
    arch: Optional[str]  # 'sm_90', 'gfx90a', ...
    compute_capability: Optional[str]  # CUDA's, e.g. '9.0'; None for other vendors


NO_DEVICE = Device(None, None, None, None)


def device_from_header(header):
    """The Device of GPU 0 as the trace's header describes it."""
    props = header.get("deviceProperties") or header.get("computeProperties")
    if not isinstance(props, list) or not props or not isinstance(props[0], dict):
        return NO_DEVICE
    first = props[0]
    name = first.get("name") if isinstance(first.get("name"), str) and first.get("name").strip() else None
    gcn = first.get("gcnArchName")
    if isinstance(gcn, str) and gcn.strip():
        return Device("amd", name, gcn.split(":")[0].strip(), None)
    if name is not None and _AMD_NAME.search(name):
        return Device("amd", name, None, None)
    major, minor = first.get("computeMajor", first.get("major")), first.get("computeMinor", first.get("minor"))
    has_capability = isinstance(major, int) and isinstance(minor, int)
    if name is not None and _NVIDIA_NAME.search(name) or (name is None and has_capability):
        # A nameless device with a capability is NVIDIA's unless the events say HIP (see below).
        if has_capability:
            return Device("nvidia", name, f"sm_{major}{minor}", f"{major}.{minor}")
        return Device("nvidia", name, None, None)
    return Device(None, name, None, None)


# Run after a load's derivations, for trace_id = $trace_id: HIP calls make a trace AMD's (and
# take back a compute capability that HIP's numbers gave it); Tensile's kernel names carry the
# gfx target as ISA942, ISA90a.
DEVICE_FROM_EVENTS = """
UPDATE trace_files SET
    vendor = CASE WHEN ev.hip THEN 'amd' WHEN vendor IS NULL AND ev.cuda THEN 'nvidia' ELSE vendor END,
    compute_capability = CASE WHEN ev.hip THEN NULL ELSE compute_capability END,
    gpu_arch = CASE WHEN ev.hip THEN coalesce(CASE WHEN vendor = 'amd' THEN gpu_arch END, ev.isa) ELSE gpu_arch END
FROM (
    SELECT bool_or(name ILIKE 'hip%') AS hip, bool_or(name ILIKE 'cuda%' OR name ILIKE 'cu%') AS cuda,
           (SELECT 'gfx' || lower(any_value(regexp_extract(k.name, 'ISA([0-9]{2,4}[a-f]?)(_|$)', 1)))
            FROM kernel_rows k
            WHERE k.trace_id = $trace_id AND regexp_matches(k.name, 'ISA[0-9]{2,4}[a-f]?(_|$)')) AS isa
    FROM runtime_rows WHERE trace_id = $trace_id
) ev
WHERE trace_id = $trace_id
"""
