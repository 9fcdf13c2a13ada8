"""A DiffResult as text: a terminal table, a pull-request comment (markdown), or JSON.

Trace names, kernel and op names and findings' titles come from the traces: the text shows them
with controls escaped, the markdown as text, not markup (tracekit.outputs.safe_text).
"""

import json

from tracekit.analysis.diff_result import METRICS
from tracekit.outputs.render import as_markdown, as_table
from tracekit.analysis.rows import Rows
from tracekit.outputs.safe_text import markdown_code, markdown_text, printable

_FIGURE_COLUMNS = ("metric", "a", "b", "change", "change_pct", "ci_low", "ci_high", "significant", "run_sd_pct")


def _figures_rows(result):
    rows = [tuple(_round(f[c]) for c in _FIGURE_COLUMNS) for f in result.figures]
    return Rows(["metric", result.a, result.b, "change", "change_pct", "ci95_low", "ci95_high", "beyond_noise",
                 "run_sd_pct"], rows)


def _attribution_rows(result):
    columns = ("key", "a_us_per_step", "b_us_per_step", "change_us_per_step", "share_pct", "a_per_step",
               "b_per_step", "status")
    names = [result.by, f"{result.a}_us_per_step", f"{result.b}_us_per_step", "change_us_per_step",
             "share_of_change_pct", f"{result.a}_per_step", f"{result.b}_per_step", "status"]
    return Rows(names, [tuple(_round(r[c]) for c in columns) for r in result.attribution])


def _round(value):
    return round(value, 3) if isinstance(value, float) else value


def _header(result):
    runs_a, runs_b = (len(names) for names in result.runs)
    if runs_a == runs_b == 1:
        what = f"{result.steps[0]} and {result.steps[1]} steady step(s)"
    else:
        what = f"{runs_a} run(s) of {result.steps[0]} steady steps in all and {runs_b} of {result.steps[1]}"
    source = next((f["run_sd_from"] for f in result.figures if f["run_sd_from"]), None)
    term = {"measured": "a run-to-run term measured from the runs",
            "default": "the default run-to-run term"}.get(source, "no run-to-run term")
    return (f"tracekit diff: {result.a} (baseline) → {result.b}; {what}; "
            f"95% intervals: a bootstrap over steps and {term}")


def _trust_lines(result):
    return ([f"Warning: {reason}" for reason in result.unlike_because]
            + [f"Intervals cannot be trusted: {reason}" for reason in result.untrusted_because])


def _findings_lines(result):
    lines = [f"appeared: {rule}: {title}" for rule, title in result.findings_appeared]
    lines += [f"went away: {rule}: {title}" for rule, title in result.findings_gone]
    return lines or ["no finding appeared or went away"]


def _verdict_lines(result):
    if not result.gated:
        return ["nothing gated: --fail-on METRIC>+N% (or finding:RULE) makes this a gate"]
    lines = [f"FAIL: {text}: {why}" for text, why in result.failed]
    lines += [f"CANNOT TELL: {text}: {why}" for text, why in result.undecided]
    if result.verdict == "undecided":
        lines.append("UNDECIDED: no --fail-on condition holds beyond noise, but the runs are too noisy to tell whether "
                     "the one(s) above do: more runs a side narrow the interval")
    elif result.verdict == "pass":
        lines.append("PASS: no --fail-on condition holds beyond noise")
    return lines


def as_text(result, width=None):
    trust = [printable(line) for line in _trust_lines(result)]
    parts = [printable(_header(result)), "", as_table(_figures_rows(result), width).rstrip(), "",
             *([*trust, ""] if trust else []),
             f"Change by {result.by}, largest first:", as_table(_attribution_rows(result), width).rstrip(), "",
             "Findings:", *[f"  {printable(line)}" for line in _findings_lines(result)], "",
             *[printable(line) for line in _verdict_lines(result)]]
    return "\n".join(parts) + "\n"


def as_markdown_summary(result):
    verdict = {"fail": ": ❌ **fail**", "undecided": ": ⚠️ **undecided**", "pass": ": ✅ **pass**"}[result.verdict]
    parts = [f"### tracekit diff: {markdown_code(result.a)} → {markdown_code(result.b)}{verdict if result.gated else ''}", "",
             *[f"- {markdown_text(line)}" for line in _verdict_lines(result) + _trust_lines(result)],
             "", as_markdown(_figures_rows(result)).rstrip(), "", f"**Top causes (by {result.by})**", "",
             as_markdown(Rows(*_top(_attribution_rows(result), 5))).rstrip(), "", "**Findings**", "",
             *[f"- {markdown_text(line)}" for line in _findings_lines(result)]]
    return "\n".join(parts) + "\n"


def _top(rows, n):
    return rows.columns, rows.rows[:n]


def as_json(result):
    payload = {"a": result.a, "b": result.b, "runs": {"a": list(result.runs[0]), "b": list(result.runs[1])},
               "steps": list(result.steps), "gated": result.gated, "verdict": result.verdict,
               "failed": [{"condition": text, "why": why} for text, why in result.failed],
               "undecided": [{"condition": text, "why": why} for text, why in result.undecided],
               "interval_trusted": result.interval_trusted, "untrusted_because": result.untrusted_because,
               "unlike_because": result.unlike_because,
               "figures": [dict(f, meaning=METRICS[f["metric"]]) for f in result.figures],
               "by": result.by, "attribution": result.attribution,
               "findings_appeared": [{"rule": r, "title": t} for r, t in result.findings_appeared],
               "findings_gone": [{"rule": r, "title": t} for r, t in result.findings_gone]}
    return json.dumps(payload, indent=2, allow_nan=False, default=str) + "\n"
