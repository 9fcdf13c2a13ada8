"""The findings engine: runs the rules of queries/findings/ and ranks what they find.

A rule is one SQL file whose rows are findings (FINDING_COLUMNS). Its header says what it
detects (first line, `rule_id: what`), then `why:`, `fix:` and `saving:` lines, then `params:`
(`name = default: meaning`) as named queries have. Every consumer (the CLI, the Python API,
the report, the Perfetto track, the `findings` view) reads these rows; a new rule is a new
file, nothing else.
"""

import re
from dataclasses import dataclass, field
from importlib import resources

from tracekit.errors import QueryError
from tracekit.analysis.named_queries import header_lines, parse_param, run_sql
from tracekit.analysis.trace_lookup import trace_row

FINDING_COLUMNS = ("trace", "rule", "severity", "title", "detail", "fix", "saving_us_per_step", "evidence")
SEVERITIES = ("high", "medium", "low", "info")
_PART = re.compile(r"^(why|fix|saving):\s*(.*)$")


@dataclass
class Rule:
    rule: str
    detects: str
    why: str
    fix: str
    saving: str
    sql: str
    params: dict = field(default_factory=dict)  # name -> (default text or None, meaning)


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
    return Rule(name, first[len(name) + 1:].strip(), parts["why"], parts["fix"], parts["saving"], text, params)


def rules():
    """Every finding rule, by id, from the installed queries.findings package."""
    folder = resources.files("tracekit.queries").joinpath("findings")
    return {entry.name[:-4]: _parse(entry.name[:-4], entry.read_text(encoding="utf-8"))
            for entry in sorted(folder.iterdir(), key=lambda e: e.name) if entry.name.endswith(".sql")}


def get_rule(name):
    known = rules()
    if name not in known:
        raise QueryError(f"no finding rule {name!r} (the rules: {', '.join(known)})")
    return known[name]


def run_findings(con, *, trace=None, rule=None, params=None):
    """The findings of every rule (or of `rule`), ranked: biggest saving first, then severity;
    findings without an estimated saving after those with one. `params` override rules'
    defaults by name (a name no selected rule takes is an error). A `trace` that names no loaded
    trace is an error, as for a named query: no rows would read as "no problems"."""
    selected = [get_rule(rule)] if rule else list(rules().values())
    given = dict(params or {})
    if trace is not None:
        given["trace"] = trace
    known = {key for r in selected for key in r.params}
    unknown = sorted(set(given) - known)
    if unknown:
        raise QueryError(f"no finding rule takes {', '.join(unknown)} (they take: {', '.join(sorted(known))})")
    if given.get("trace") is not None:
        trace_row(con, given["trace"])
    import pandas as pd  # the engine's rows are DataFrames; the CLI's query path must not pay for pandas

    frames = []
    for r in selected:
        bound = {key: given.get(key, default) for key, (default, _) in r.params.items()}
        frame = run_sql(con, r.sql, bound or None)
        if list(frame.columns) != list(FINDING_COLUMNS):
            raise QueryError(f"finding rule {r.rule} returns {', '.join(frame.columns)}, "
                             f"not {', '.join(FINDING_COLUMNS)}")
        frames.append(frame)
    found = pd.concat([f for f in frames if len(f)], ignore_index=True) if any(len(f) for f in frames) \
        else pd.DataFrame({column: [] for column in FINDING_COLUMNS})
    return rank(found)


def rank(found):
    order = found.assign(_has=found["saving_us_per_step"].notna(),
                         _severity=found["severity"].map({s: i for i, s in enumerate(SEVERITIES)}))
    order = order.sort_values(["_has", "saving_us_per_step", "_severity", "trace", "rule", "title"],
                              ascending=[False, False, True, True, True, True], na_position="last", kind="stable")
    return order.drop(columns=["_has", "_severity"]).reset_index(drop=True)


def view_sql():
    """One SELECT over every rule with its default parameters: the `findings` view."""
    parts = []
    for r in rules().values():
        sql = r.sql
        for key, (default, _) in sorted(r.params.items(), key=lambda item: -len(item[0])):
            sql = re.sub(rf"\${key}\b", "NULL" if default is None else _literal(default), sql)
        body = "\n".join(line for line in sql.splitlines() if not line.lstrip().startswith("--")).rstrip().rstrip(";")
        parts.append(f"SELECT * FROM ({body})")
    return "\nUNION ALL\n".join(parts)


def _literal(text):
    return text if re.fullmatch(r"-?\d+(\.\d+)?", text) else "'" + text.replace("'", "''") + "'"
