"""The findings engine: runs the rules of queries/findings/, replays each finding's fix, and ranks
what they find.

A rule is one SQL file whose rows are findings (RULE_COLUMNS). Its header says what it detects
(first line, `rule_id: what`), then `why:`, `fix:` and `saving:` lines, an `unsaved:` line where a
row may name no fix (why it has no saving: a finding's detail says it), then `params:`
(`name = default: meaning`) as named queries have. A finding names the fix it implies as the
replay takes it (`whatif`, tracekit.replay.fixes), and its `estimate_us_per_step` is the rule's own
figure from its slice of the step (the copies' GPU time, the idle gaps, ...). The engine replays
each fix on the trace's graph (tracekit.replay): `saving_us_per_step` is what the step would save,
never more than the step, on the loop as it runs without the profiler (each recorded op's cost,
estimated from the trace, taken out: tracekit.replay.profiler_cost), and
`traced_saving_us_per_step` the same fix replayed on the loop as traced; each trace's findings end
with all its fixes replayed together. Every
consumer (the CLI, the Python API, the report, the Perfetto track) reads these rows; the
`findings` view (tracekit.store.findings_view) holds the rules' rows without the replay. A new
rule is a new file, nothing else.
"""

import re
from dataclasses import dataclass, field

from tracekit.errors import QueryError
from tracekit.analysis.named_queries import header_lines, parse_param, run_sql
from tracekit.analysis.param_values import as_sql_text, checked
from tracekit.analysis.saving_words import same_saving, unprofiled, unsteady, why_less, why_more
from tracekit.replay import FIX_SEPARATOR
from tracekit.analysis.trace_lookup import trace_row
from tracekit.analysis.view_snapshots import snapshots
from tracekit.store.findings_view import rule_texts

RULE_COLUMNS = ("trace", "rule", "severity", "title", "detail", "fix", "whatif", "estimate_us_per_step", "evidence")
FINDING_COLUMNS = ("trace", "rule", "severity", "title", "detail", "fix", "whatif", "saving_us_per_step",
                   "traced_saving_us_per_step", "estimate_us_per_step", "evidence")
# What a reader needs to read a finding: a table fitted to the terminal keeps these first.
FINDING_KEYS = ("trace", "rule", "title", "saving_us_per_step")
ALL_FIXES = "all_fixes"  # the rule of each trace's last row: its fixes replayed together
NO_FIX = "; no fix replayed: "  # in a detail, before why its finding names no fix (so no saving)
UNSAVED_UNSAID = "its rule names no change to replay for it"  # a rule without an `unsaved:` line
SEVERITIES = ("high", "medium", "low", "info")
# The views of a row per step or per trace that most rules read: computed once for a run of the
# rules, not planned and computed again in each (tracekit.analysis.view_snapshots).
SHARED_VIEWS = ("steps", "steady_steps", "steady_window", "step_totals")
_PART = re.compile(r"^(why|fix|saving|unsaved):\s*(.*)$")


@dataclass
class Rule:
    rule: str
    detects: str
    why: str
    fix: str
    saving: str
    sql: str
    params: dict = field(default_factory=dict)  # name -> (default text or None, meaning)
    unsaved: str = None  # why a row of it may name no fix to replay (its header's `unsaved:` line)


def _parse(name, text):
    header = header_lines(text)
    first = header[0] if header else ""
    if not first.startswith(f"{name}:"):
        raise QueryError(f"queries/findings/{name}.sql: the header must start with '-- {name}: what it detects'")
    parts, params, section = {}, {}, None
    for line in header[1:]:
        if line == "params:":
            section = "params"
        elif section == "params" and parse_param(line):
            key, default, meaning = parse_param(line)
            params[key] = (default, meaning)
        elif _PART.match(line):
            key, value = _PART.match(line).groups()
            parts[key] = value
    missing = [key for key in ("why", "fix", "saving") if key not in parts]
    if missing:
        raise QueryError(f"queries/findings/{name}.sql: its header has no {', '.join(missing)} line")
    return Rule(name, first[len(name) + 1:].strip(), parts["why"], parts["fix"], parts["saving"], text, params,
                parts.get("unsaved"))


def rules():
    """Every finding rule, by id, from the installed queries.findings package."""
    return {name: _parse(name, text) for name, text in rule_texts().items()}


def get_rule(name):
    known = rules()
    if name not in known:
        raise QueryError(f"no finding rule {name!r} (the rules: {', '.join(known)})")
    return known[name]


def run_findings(con, *, trace=None, rule=None, params=None, replay=True):
    """The findings of every rule (or of `rule`), ranked: biggest saving first, then severity;
    findings without a saving after those with one; then each trace's fixes together. `params`
    override rules' defaults by name (a name no selected rule takes is an error). A `trace` that
    names no loaded trace is an error, as for a named query: no rows would read as "no problems".
    `replay=False` leaves saving_us_per_step NULL and adds no all-fixes rows (for callers that
    only need which rules fire)."""
    selected = [get_rule(rule)] if rule else list(rules().values())
    given = dict(params or {})
    if trace is not None:
        given["trace"] = trace
    known = {key for r in selected for key in r.params}
    unknown = sorted(set(given) - known)
    if unknown:
        raise QueryError(f"no finding rule takes {', '.join(unknown)} (they take: {', '.join(sorted(known))})")
    given = {key: checked(key, value) for key, value in given.items()}  # every value before any rule runs
    if given.get("trace") is not None:
        trace_row(con, given["trace"])
    prefetch = None
    if replay:
        from tracekit.replay.prefetch import graphs_read_meanwhile

        prefetch = graphs_read_meanwhile(con, given.get("trace"))
    try:
        with snapshots(con, SHARED_VIEWS, [r.sql for r in selected]):
            found = _found_by(con, selected, given)
            if not replay or not len(found):
                return rank(found)
            return _replayed(con, found, selected, together=rule is None, prefetch=prefetch)
    finally:
        if prefetch:
            prefetch.stop()  # whatever ended the run: no thread left reading


def _found_by(con, selected, given):
    """The rows of the rules `selected`, with the replay's columns empty."""
    import pandas as pd  # the engine's rows are DataFrames; the CLI's query path must not pay for pandas

    frames = [_rule_rows(con, r, given) for r in selected]
    found = pd.concat([f for f in frames if len(f)], ignore_index=True) if any(len(f) for f in frames) \
        else pd.DataFrame({column: [] for column in RULE_COLUMNS})
    found["estimate_us_per_step"] = found["estimate_us_per_step"].astype("float64").round(1)
    for column in ("saving_us_per_step", "traced_saving_us_per_step"):
        found.insert(list(FINDING_COLUMNS).index(column), column, float("nan"))
        found[column] = found[column].astype("float64")
    return found


def _rule_rows(con, r, given):
    bound = {key: as_sql_text(checked(key, given.get(key, default))) for key, (default, _) in r.params.items()}
    frame = run_sql(con, r.sql, bound or None)
    if list(frame.columns) != list(RULE_COLUMNS):
        raise QueryError(f"finding rule {r.rule} returns {', '.join(frame.columns)}, not {', '.join(RULE_COLUMNS)}")
    return frame


def _replayed(con, found, selected, together=True, prefetch=None):
    """`found` with each fix's replayed saving, ranked, and (`together`) each trace's fixes together
    at the end; `selected`: the Rules that found them; `prefetch`: the graphs read beside the rules
    and the replays (replay.prefetch)."""
    import pandas as pd

    from tracekit.replay.savings import replay_savings

    wanted = [(t, w) for t, w in zip(found["trace"], found["whatif"]) if isinstance(w, str) and w]
    jobs = prefetch.jobs_for([t for t, _ in wanted]) if prefetch else None  # in the order replayed
    each, all_fixes = replay_savings(con, wanted, jobs)
    unsaved = {r.rule: r.unsaved or UNSAVED_UNSAID for r in selected}
    alike = _alike(found, each)
    savings, traced, details, severities = [], [], [], []
    for n, (t, w, rule, detail, estimate, severity) in enumerate(zip(
            found["trace"], found["whatif"], found["rule"], found["detail"], found["estimate_us_per_step"],
            found["severity"])):
        replayed = each.get((t, w)) if isinstance(w, str) else None
        severities.append(_graded(severity, replayed))
        savings.append(_us(replayed.saving_us) if replayed else None)
        traced.append(_us(replayed.traced_saving_us) if replayed else None)
        detail = detail or ""
        if not isinstance(w, str) or not w:
            # a rule may say per row why no fix is replayed; else its header's `unsaved:` line says it
            if NO_FIX not in detail:
                detail = f"{detail}{NO_FIX}{unsaved.get(rule, UNSAVED_UNSAID)}"
        elif replayed is not None and replayed.why is not None:
            detail = f"{detail}; replayed saving unknown: {replayed.why}"
        elif replayed is not None:
            detail += (why_less(replayed, estimate) + why_more(replayed, estimate, w)
                       + same_saving([found["rule"].iat[k] for k in alike.get(n, ())]))
        details.append(detail)
    found = found.assign(saving_us_per_step=pd.array(savings, dtype="Float64").astype("float64"),
                         traced_saving_us_per_step=pd.array(traced, dtype="Float64").astype("float64"), detail=details,
                         severity=severities)
    rows = [_all_fixes_row(t, w, replayed, found) for t, (w, replayed) in sorted(all_fixes.items()) if together]
    return pd.concat([rank(found), pd.DataFrame(rows, columns=list(FINDING_COLUMNS))], ignore_index=True) \
        if rows else rank(found)


def _alike(found, each):
    """{row: the other rows of its trace whose fix is the same or replays the same}: the same
    whatif, or a saving above 0 replayed to the same step times (drop-sync:aten::item and
    drop-sync:cudaStreamSynchronize, where the one sync is .item()'s)."""
    groups = {}
    for n, (t, w) in enumerate(zip(found["trace"], found["whatif"])):
        replayed = each.get((t, w)) if isinstance(w, str) and w else None
        if replayed is None or replayed.saving_us is None:
            continue
        # two fixes whose steps replay to the same nanosecond do the same (not a coincidence of floats)
        key = (t, replayed.fixed_us) if replayed.saving_us > 0 else (t, w)
        groups.setdefault(key, []).append(n)
    return {n: [k for k in rows if k != n] for rows in groups.values() if len(rows) > 1 for n in rows}


# A finding whose fix was replayed is as severe as the share of the step the fix saves, whatever its
# rule made of what it counted (a 200 µs wait can hold back 5 ms of launches; 14 ms of idle can be the
# profiler's own cost): at least this share of the replayed step, high, then medium; below, low.
SEVERITY_BY_SAVING = (("high", 0.10), ("medium", 0.03))


def _graded(severity, replayed):
    """The severity of a finding: by its replayed saving's share of the step, where it has one."""
    if replayed is None or replayed.saving_us is None or not replayed.step_us:
        return severity
    share = replayed.saving_us / replayed.step_us
    return next((name for name, floor in SEVERITY_BY_SAVING if share >= floor), "low")


def _us(value):
    """To the 0.1 µs a person reads (the replay counts whole nanoseconds; the rest is float noise)."""
    return None if value is None else round(value, 1)


def _all_fixes_row(trace, whatif, replayed, found):
    count = whatif.count(FIX_SEPARATOR) + 1
    mine = found[found["trace"] == trace]
    summed = mine.drop_duplicates("whatif")["saving_us_per_step"].sum()
    if replayed.saving_us is None:
        title = f"All {count} fixes together: replayed saving unknown"
        detail = replayed.why
    else:
        title = (f"{f'All {count} fixes together' if count > 1 else 'Its one fix'}: {replayed.saving_us:,.1f} µs of the "
                 f"{replayed.step_us:,.1f} µs step ({100 * replayed.saving_us / replayed.step_us:.0f}%)")
        detail = (f"the steady step replayed as it is takes {replayed.step_us:,.1f} µs, with "
                  f"{'every fix' if count > 1 else 'the fix'} {replayed.fixed_us:,.1f} µs")
        detail += unprofiled(replayed) + unsteady(replayed)
        if count > 1:
            detail += (f"; the findings' own savings add up to {summed:,.1f} µs, as each is replayed alone "
                       "and fixes that relieve the same wait share their saving")
    return {"trace": trace, "rule": ALL_FIXES, "severity": "info", "title": title, "detail": detail,
            "fix": "apply the fixes of the findings above", "whatif": whatif,
            "saving_us_per_step": _us(replayed.saving_us), "traced_saving_us_per_step": _us(replayed.traced_saving_us),
            "estimate_us_per_step": None, "evidence": []}


def rank(found):
    order = found.assign(_has=found["saving_us_per_step"].notna(), _estimated=found["estimate_us_per_step"].notna(),
                         _severity=found["severity"].map({s: i for i, s in enumerate(SEVERITIES)}))
    order = order.sort_values(["_has", "saving_us_per_step", "_estimated", "estimate_us_per_step", "_severity",
                               "trace", "rule", "title"],
                              ascending=[False, False, False, False, True, True, True, True], na_position="last",
                              kind="stable")
    return order.drop(columns=["_has", "_estimated", "_severity"]).reset_index(drop=True)
