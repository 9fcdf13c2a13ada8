"""`tracekit diff --fail-on`: the conditions a CI job gates on, and how a DiffResult meets them.

A condition on a change fails when it holds and the change is beyond noise (its 95% interval
leaves out zero). When it does not fail but its interval holds both no change and the threshold,
the comparison cannot tell whether the threshold was crossed: the condition is undecided, said so
rather than passed in silence (runs too noisy for the threshold: give more runs a side).
"""

import re
from dataclasses import dataclass

from tracekit.analysis.diff_result import METRICS
from tracekit.errors import TracekitError

_FAIL_ON = re.compile(r"^\s*(\w+)\s*(>=|<=|>|<)\s*([+-]?)(\d+(?:\.\d+)?)\s*(%?)\s*$")
_HOLDS = {">": lambda x, v: x > v, ">=": lambda x, v: x >= v, "<": lambda x, v: x < v, "<=": lambda x, v: x <= v}


@dataclass
class Condition:
    text: str
    metric: str = None
    op: str = None
    value: float = 0.0
    relative: bool = False
    change: bool = False  # compares the change (signed value) rather than B's own value
    finding: str = None


def parse_condition(text):
    """A --fail-on expression: `metric>+3%` (relative change), `metric>+100` (absolute change),
    `metric>0` (B's value), or `finding:rule` (the rule's finding appears in B)."""
    if text.startswith("finding:"):
        rule = text[len("finding:"):].strip()
        if not rule:
            raise TracekitError(f"--fail-on {text!r}: name a rule after finding:")
        from tracekit.analysis.findings_engine import rules
        known = sorted(rules())
        if rule not in known:
            # A misspelt rule would never appear in B: a CI gate that could never fail.
            raise TracekitError(f"--fail-on {text!r}: no finding rule {rule!r} (rules: {', '.join(known)})")
        return Condition(text, finding=rule)
    match = _FAIL_ON.match(text)
    if match is None:
        raise TracekitError(f"--fail-on {text!r}: write METRIC>VALUE, METRIC>+N% or finding:RULE "
                            f"(metrics: {', '.join(METRICS)})")
    metric, op, sign, number, pct = match.groups()
    if metric not in METRICS:
        raise TracekitError(f"--fail-on {text!r}: no metric {metric!r} (metrics: {', '.join(METRICS)})")
    value = float(number) * (-1 if sign == "-" else 1)
    return Condition(text, metric, op, value, relative=bool(pct), change=bool(sign or pct))


def check(condition, result):
    """('fail', (text, why)) when the condition holds beyond noise, ('undecided', (text, why)) when
    its interval cannot tell, else None."""
    if condition.finding is not None:
        hit = [title for rule, title in result.findings_appeared if rule == condition.finding]
        return ("fail", (condition.text, f"{condition.finding} appeared in {result.b}: {hit[0]}")) if hit else None
    figure = next(f for f in result.figures if f["metric"] == condition.metric)
    measured, low, high = _in_condition_units(condition, figure)
    if measured is None:
        return None
    if _HOLDS[condition.op](measured, condition.value) and figure["significant"]:
        what = "changed by" if condition.change else f"is {_num(figure['b'])} in {result.b}, changed by"
        return ("fail", (condition.text, f"{condition.metric} {what} {_num(figure['change'], '+')} "
                                         f"({_pct(figure['change_pct'])}), 95% interval {_interval(figure)}"))
    if _cannot_tell(condition, low, high):
        return ("undecided", (condition.text, f"{condition.metric} changed by {_num(figure['change'], '+')} "
                                              f"({_pct(figure['change_pct'])}), but its 95% interval "
                                              f"{_interval(figure)} holds both no change and the threshold"))
    return None


def _in_condition_units(condition, figure):
    """(the figure the condition compares, its interval's ends) in the condition's units; Nones
    where the figure is missing (a CPU trace's GPU time, a relative change from zero)."""
    if figure["change"] is None:
        return None, None, None
    if condition.relative:
        if figure["change_pct"] is None:
            return None, None, None
        scale = 100.0 / figure["a"]
        return figure["change_pct"], _times(figure["ci_low"], scale), _times(figure["ci_high"], scale)
    if condition.change:
        return figure["change"], figure["ci_low"], figure["ci_high"]
    return figure["b"], None, None  # B's own value: no interval of a change to weigh it by


def _cannot_tell(condition, low, high):
    """The interval holds zero and the threshold, a threshold that no change does not cross: for
    `>` and `>=` above zero, for `<` and `<=` below it."""
    if low is None or high is None:
        return False
    beyond_zero = condition.value > 0 if condition.op in (">", ">=") else condition.value < 0
    return beyond_zero and low <= 0 <= high and low <= condition.value <= high


def _times(value, scale):
    return None if value is None else value * scale


def _num(value, sign=""):
    return f"{value:{sign},.0f}" if float(value).is_integer() else f"{value:{sign},.3f}"


def _pct(value):
    return "from zero" if value is None else f"{value:+.1f}%"


def _interval(figure):
    if figure["ci_low"] is None:
        return "none"
    return f"[{_num(figure['ci_low'], '+')}, {_num(figure['ci_high'], '+')}]"
