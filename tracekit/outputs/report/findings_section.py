"""The report's findings section: the findings engine's rows (tracekit.analysis.findings_engine), drawn
as cards (HTML) or bullets (markdown). Nothing here knows a rule: a new rule's findings show up
as they are.

Findings are grouped by rule, the rules in the order of their best-ranked finding, and each
group keeps the engine's ranking (biggest saving first, then severity). A group shows at most
CARDS_PER_RULE findings in full; the rest are listed in one line each (HTML: folded under
<details>), so a database with hundreds of findings still reads.
"""

from dataclasses import dataclass

from tracekit.analysis.findings_engine import ALL_FIXES, SEVERITIES, rules
from tracekit.outputs.report import units
from tracekit.outputs.safe_text import html_text, markdown_text

CARDS_PER_RULE = 4
LISTED_PER_RULE = 50  # past the cards: one line each, up to this many, then a count


@dataclass
class RuleGroup:
    rule: str
    detects: str     # the rule's header: what it detects
    findings: list   # the rule's findings (dicts of FINDING_COLUMNS), in the engine's order

    @property
    def shown(self):
        return self.findings[:CARDS_PER_RULE]

    @property
    def listed(self):
        return self.findings[CARDS_PER_RULE:CARDS_PER_RULE + LISTED_PER_RULE]

    @property
    def unlisted(self):
        return max(len(self.findings) - CARDS_PER_RULE - LISTED_PER_RULE, 0)


def groups(found):
    """The engine's ranked rows (a DataFrame) as one RuleGroup per rule, best-ranked rule first."""
    known = rules()
    by_rule = {}
    for finding in found.to_dict("records"):
        by_rule.setdefault(finding["rule"], []).append(finding)
    described = {rule: r.detects for rule, r in known.items()}
    described[ALL_FIXES] = "each trace's fixes replayed together: what they would save at once"
    return [RuleGroup(rule, described.get(rule, ""), rows) for rule, rows in by_rule.items()]


def saving_text(finding):
    """'about 253.7 µs per step', or None when the rule does not estimate a saving."""
    value = finding["saving_us_per_step"]
    return None if units.missing(value) else f"about {units.us(value)} per step"


def overview(found):
    """One sentence: how many findings, from how many rules, in how many traces, by severity."""
    if found.empty:
        return "No finding rule found anything in these traces."
    counts = found["severity"].value_counts()
    by_severity = ", ".join(f"{int(counts[s])} {s}" for s in SEVERITIES if s in counts)
    return (f"{len(found)} finding(s) from {found['rule'].nunique()} rule(s) in {found['trace'].nunique()} "
            f"trace(s) ({by_severity}), biggest replayed saving first.")


def _more_text(group):
    return f"{len(group.findings) - CARDS_PER_RULE} more {group.rule} finding(s)"


# --- HTML -----------------------------------------------------------------------------------

def _e(text):
    return html_text(text)


def _card(f):
    saving = saving_text(f)
    return (f'<div class="finding {_e(f["severity"])}" data-rule="{_e(f["rule"])}" data-trace="{_e(f["trace"])}" '
            f'data-severity="{_e(f["severity"])}"><div class="topic"><span class="sev">{_e(f["severity"])}</span> '
            f'{_e(f["trace"])}</div><p class="title">{_e(f["title"])}</p><p class="detail">{_e(f["detail"])}</p>'
            f'<p class="fix"><b>Fix:</b> {_e(f["fix"])}</p>'
            + (f'<p class="saving"><b>Saves</b> {_e(saving)}</p>' if saving else "") + "</div>")


def _line(f):
    saving = saving_text(f)
    return (f'<li data-trace="{_e(f["trace"])}" data-severity="{_e(f["severity"])}"><b>{_e(f["trace"])}</b> '
            f'<span class="sev {_e(f["severity"])}">{_e(f["severity"])}</span> {_e(f["title"])}'
            + (f" (saves {_e(saving)})" if saving else "") + "</li>")


def _html_group(group):
    more = ""
    if group.listed:
        tail = f"<li>… and {group.unlisted} more</li>" if group.unlisted else ""
        more = (f'<details class="more"><summary>{_e(_more_text(group))}</summary><ul>'
                + "".join(_line(f) for f in group.listed) + tail + "</ul></details>")
    return (f'<div class="rule-group" data-rule="{_e(group.rule)}"><h3>{_e(group.rule)} '
            f'<span class="count">{len(group.findings)}</span></h3><p class="cap">{_e(group.detects)}</p>'
            '<div class="findings">' + "".join(_card(f) for f in group.shown) + "</div>" + more + "</div>")


def html_section(found):
    """<section id="findings">: the overview, then a group of cards per rule."""
    body = "".join(_html_group(g) for g in groups(found))
    hint = "" if found.empty else " <code>tracekit findings --evidence</code> lists them all with their events."
    return (f'<section id="findings"><h2>Findings</h2><p class="overview">{_e(overview(found))}{hint}</p>'
            f"{body}</section>")


# --- markdown -------------------------------------------------------------------------------

def _md(text):
    """Text that renders as itself: a rule's `(__launch_bounds__, ...)` is not bold, a kernel's
    name is no HTML or image (safe_text.markdown_text)."""
    return markdown_text(text)


def _bullet(f):
    saving = saving_text(f)
    head = f"- **{f['severity']} · {_md(f['trace'])}: {_md(f['title'])}**" + (f" (saves {saving})" if saving else "")
    lines = [head, f"  - {_md(f['detail'])}", f"  - Fix: {_md(f['fix'])}"]
    return "\n".join(lines)


def markdown_section(found):
    """The findings as markdown: a heading per rule, a bullet per finding with its fix and saving."""
    hint = "" if found.empty else " `tracekit findings` lists them all."
    lines = ["## Findings", "", overview(found) + hint]
    for group in groups(found):
        lines += ["", f"### {_md(group.rule)} ({len(group.findings)}): {_md(group.detects)}", ""]
        lines += [_bullet(f) for f in group.shown]
        if len(group.findings) > CARDS_PER_RULE:
            rest = "; ".join(f"{_md(f['trace'])} ({f['severity']}): {_md(f['title'])}" for f in group.listed)
            tail = f"; and {group.unlisted} more" if group.unlisted else ""
            lines.append(f"- {_md(_more_text(group))}: {rest}{tail}")
    return "\n".join(lines) + "\n"
