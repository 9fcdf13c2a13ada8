"""What `tracekit diff` compares (its per-step metrics) and what it gives back (DiffResult)."""

from dataclasses import dataclass, field

METRICS = {
    "gpu_us_per_step": "GPU busy time per step, µs (union of kernels, copies and fills)",
    "kernel_us_per_step": "summed kernel time per step, µs",
    "kernels_per_step": "kernel launches per step",
    "memcpy_per_step": "memcpys per step",
    "memcpy_bytes_per_step": "bytes copied per step (copies of known size)",
    "cpu_us_per_step": "CPU span of the step, µs (ProfilerStep#N)",
}


@dataclass
class DiffResult:
    a: str  # how the baseline side was named: a trace, or the pattern or list of its runs
    b: str
    steps: tuple  # steady steps of each side, all its runs together
    figures: list  # dicts: metric, a, b, change, change_pct, ci_low, ci_high, significant, run_sd_pct, run_sd_from
    attribution: list  # dicts: key, a_us_per_step, b_us_per_step, change_us_per_step, share_pct, ...
    by: str
    findings_appeared: list = field(default_factory=list)  # (rule, title)
    findings_gone: list = field(default_factory=list)
    failed: list = field(default_factory=list)  # (condition text, why)
    undecided: list = field(default_factory=list)  # (condition text, why): the interval cannot tell
    runs: tuple = ((), ())  # the trace names of each side's runs
    untrusted_because: list = field(default_factory=list)  # why the intervals cannot be fully trusted
    unlike_because: list = field(default_factory=list)  # how the sides differ besides the code: device, shape
    gated: bool = False  # whether --fail-on conditions were given: without, the verdict gates nothing

    @property
    def verdict(self):
        """fail: a --fail-on condition holds beyond noise; undecided: none does, but the interval of
        one cannot rule out that it holds; pass otherwise."""
        return "fail" if self.failed else "undecided" if self.undecided else "pass"

    @property
    def interval_trusted(self):
        return not self.untrusted_because
