"""The header comment that opens a tracekit SQL file (a named query, a finding rule): its lines,
and its `params:` lines (`name = default: meaning`)."""

import re

_PARAM = re.compile(r"^(\w+)\s*=\s*(.*?):\s*(.*)$")


def header_lines(text):
    """The lines of the comment block that opens an SQL file, without their `--`."""
    header = []
    for line in text.splitlines():
        if not line.startswith("--"):
            break
        header.append(line[2:].strip())
    return header


def parse_param(line):
    """(name, default text or None, meaning) of a `name = default: meaning` header line, or None."""
    match = _PARAM.match(line)
    if match is None:
        return None
    key, default, meaning = match.groups()
    return key, None if default.upper() == "NULL" else default, meaning


def header_params(text):
    """{name: default text or None} of the `params:` section of an SQL file's header, in order."""
    params, section = {}, None
    for line in header_lines(text):
        if line.endswith(":") and " " not in line:
            section = line[:-1]
        elif section == "params" and parse_param(line):
            key, default, _ = parse_param(line)
            params[key] = default
    return params
