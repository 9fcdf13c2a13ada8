"""The work models: each op family's FLOPs and bytes as formulas over its recorded input shapes,
kept as rows of knowledge/op_work_models.csv (one per op pattern, with its source), and rendered
into the SQL statement of derive_3_kernels.sql that computes every op's work at load.

A formula is a SQL expression over these names (i: the input's place in the op's schema, as
Kineto's `Input Dims`, `Input type` and `Concrete Inputs` list them; j: a dim, negative from the end):

  n<i>         elements of input i (a tensor list's summed; NULL for a scalar or None)
  s<i>         bytes per element of input i's dtype (NULL for a scalar, None or a tensor list)
  d<i>[j]      size of dim j of input i
  x<i>         input i's shape, as JSON (for the wm_ macros)
  c<i>         Concrete Inputs' value i as a number; c<i>[j] element j of a list value ("[1, 1]")
  cb<i>        Concrete Inputs' value i as a bool (True/False); ct<i> as text
  nmax         the largest input's elements (an elementwise op's broadcast output)
  smax         the widest dtype's bytes among inputs that are not 0-dim (the output's, by promotion)
  in_bytes     all tensor inputs' bytes
  sk           the element size the op's kernel names (OpaqueType<N> of ATen's copy kernels, the
               functor's type of a foreach kernel: BinaryOpScalarFunctor<float, ...>), for a tensor
               list, whose dtype Kineto does not write
  nl           how many of the op's inputs are tensor lists

and the wm_ macros of derive_3_kernels.sql. In the CSV `;` separates a function's arguments, so
that a formula needs no quoting.
"""

import csv
import functools
import io
import re
from importlib import resources

from tracekit.store.pattern_literals import could_match

COLUMNS = ("op", "family", "dtype_of", "flops", "bytes", "model_flops", "source")
FAMILIES = ("gemm", "convolution", "attention", "softmax", "norm", "loss", "embedding", "copy", "elementwise",
            "reduction", "optimizer")
# Matrix math: its roofline takes the Tensor Core peak of its dtype; the others the vector peak.
MATRIX_FAMILIES = ("gemm", "convolution", "attention")

# Each name of a formula: (its pattern, the SQL it stands for, the column it is bound once as in
# _op_work, or None where the SQL is already cheap to bind: an input's elements and element size).
_TOKENS = [
    (re.compile(r"\bd(\d+)\[(-?\d+)\]"), lambda m: f"TRY_CAST(json_extract(dims, '{_path(m[1], m[2])}') AS DOUBLE)",
     lambda m: f"f_d{m[1]}_{m[2].replace('-', 'm')}"),
    (re.compile(r"\bc(\d+)\[(\d+)\]"), lambda m: f"wm_item(json_extract_string(conc, '$[{m[1]}]'), {m[2]})",
     lambda m: f"f_c{m[1]}_{m[2]}"),
    (re.compile(r"\bcb(\d+)\b"), lambda m: f"wm_bool(json_extract_string(conc, '$[{m[1]}]'))", lambda m: f"f_cb{m[1]}"),
    (re.compile(r"\bct(\d+)\b"), lambda m: f"json_extract_string(conc, '$[{m[1]}]')", lambda m: f"f_ct{m[1]}"),
    (re.compile(r"\bc(\d+)\b"), lambda m: f"TRY_CAST(json_extract_string(conc, '$[{m[1]}]') AS DOUBLE)",
     lambda m: f"f_c{m[1]}"),
    (re.compile(r"\bn(\d+)\b"), lambda m: f"ins[{int(m[1]) + 1}].n", None),
    (re.compile(r"\bs(\d+)\b"), lambda m: f"ins[{int(m[1]) + 1}].s", None),
    (re.compile(r"\bsk\b"), lambda m: "kernel_elem_bytes", None),
    (re.compile(r"\bnl\b"), lambda m: "tensor_lists", None),
    (re.compile(r"\bx(\d+)\b"), lambda m: f"json_extract(dims, '$[{m[1]}]')", lambda m: f"f_x{m[1]}"),
]


def _path(i, j):
    j = int(j)
    return f"$[{i}][{j}]" if j >= 0 else f"$[{i}][#{j}]"


@functools.lru_cache(maxsize=None)
def rules():
    """The rows of op_work_models.csv, in order (the first whose pattern matches an op wins)."""
    text = resources.files("tracekit.store").joinpath("knowledge", "op_work_models.csv").read_text(encoding="utf-8")
    rows = list(csv.DictReader(io.StringIO(text)))
    for line, row in enumerate(rows, start=2):
        if tuple(row) != COLUMNS or row["family"] not in FAMILIES or not row["flops"] or not row["source"]:
            raise ValueError(f"op_work_models.csv line {line}: needs {', '.join(COLUMNS)}, a family of "
                             f"{', '.join(FAMILIES)}, a flops formula and a source")
    # The patterns run in DuckDB (RE2): tests/test_work_models.py compiles each there, once, not
    # Python's re in every load (3 ms of a small trace's command).
    return tuple(rows)


def to_sql(formula, bound=None):
    """A formula of the CSV as the SQL expression it stands for; an empty one is NULL. With `bound`
    (a dict), each shape value the formula reads becomes a column name, and `bound` maps the name to
    the value's SQL."""
    if not formula.strip():
        return "NULL"
    sql = formula.replace(";", ",")
    for pattern, replace, column in _TOKENS:
        sql = pattern.sub(replace if bound is None or column is None else _binder(replace, column, bound), sql)
    return sql


def _binder(replace, column, bound):
    """A substitution that writes a token as its column's name and keeps the token's SQL in `bound`."""
    def bind(match):
        name = column(match)
        bound.setdefault(name, replace(match))
        return name
    return bind


def _case(column, used, bound, otherwise=None):
    """CASE rule WHEN N THEN the formula of `column` ... for the rules numbered in `used` whose formula
    is not empty, else `otherwise` (NULL when not given; alone when no rule has a formula)."""
    arms = "\n".join(f"                WHEN {number} THEN {to_sql(row[column], bound)}"
                     for number, row in enumerate(rules(), start=1)
                     if number in used and (otherwise is None or row[column].strip()))
    if not arms:
        return otherwise or "NULL"
    return f"CASE rule\n{arms}\n{f'                ELSE {otherwise}' + chr(10) if otherwise else ''}           END"


# The formulas' places in _op_work: render_formulas fills them in for the rules a trace uses.
FORMULA_MARKERS = ("/*work_flops*/", "/*work_bytes*/", "/*work_model_flops*/", "/*work_shape_values*/")


# A pattern without these is its own text: it matches a name whole only where the name equals it.
_REGEX_SYNTAX = re.compile(r"[\\.^$|?*+()\[\]{}]")


def _matches(pattern):
    """SQL for `name` matching `pattern` whole: an equality where the pattern is plain text (half the
    rules), which DuckDB binds in a third of the time of a regular expression it compiles."""
    if _REGEX_SYNTAX.search(pattern) is None:
        return f"name = '{pattern}'"
    return f"regexp_full_match(name, '{pattern}')"


def _values(used=None):
    """The rules' VALUES rows (number, pattern, family, dtype_of): of those numbered in `used` (None:
    every rule; none used: a row no op takes, as VALUES needs one)."""
    rows = [f"({number}, '{row['op']}', '{row['family']}', {int(row['dtype_of'])})"
            for number, row in enumerate(rules(), start=1) if used is None or number in used]
    return ",\n           ".join(rows) if rows else "(0, '', '', 0)"


# The rules' places in _op_rules: render_rules fills them in with the rules a trace's op names could take.
RULE_MARKERS = ("/*work_rules*/", "/*work_match*/")


def render(statement):
    """A derive_3_kernels.sql statement with every rule in place of its markers (render_rules); the
    formulas' markers are render_formulas' to fill."""
    return render_rules(statement)


def render_rules(statement, names=None):
    """_op_rules with the rules' VALUES and their patterns' CASE in place of its markers: of the rules
    whose pattern could match one of `names` (None: every rule). A rule left out matches no name the
    trace has, and DuckDB binds every arm of the CASE each load, whether or not a name takes it."""
    if RULE_MARKERS[0] not in statement:
        return statement
    patterns = [row["op"] for row in rules()]
    if names is None:
        kept = set(range(1, len(patterns) + 1))
    else:
        plain = set(names)
        kept = {number for number in could_match(patterns, names, ignore_case=False)
                if _REGEX_SYNTAX.search(patterns[number - 1]) or patterns[number - 1] in plain}
    arms = " ".join(f"WHEN {_matches(pattern)} THEN {number}"
                    for number, pattern in enumerate(patterns, start=1) if number in kept)
    return (statement.replace(RULE_MARKERS[0], _values(kept))
            .replace(RULE_MARKERS[1], f"CASE {arms} END" if arms else "CAST(NULL AS INTEGER)"))


def render_formulas(statement, used=None):
    """_op_work with the rows and formulas of the rules numbered in `used` (None: every rule) in place of
    its markers; the other rules' arms are left out, as no row takes them. DuckDB binds every node of
    every arm each load (the formulas were 14 of a GPT-2 training trace's 40 ms of planning _op_work):
    each shape value the formulas read (d0[1], c2) is a column, bound once however many formulas read
    it, and a model FLOPs formula that is the FLOPs' is not written out again."""
    used = set(range(1, len(rules()) + 1)) if used is None else set(used)
    bound = {}
    flops = _case("flops", used, bound)
    nbytes = _case("bytes", used, bound)
    model_flops = _case("model_flops", used, bound, otherwise="flops")
    shape_values = "".join(f",\n           {sql} AS {name}" for name, sql in bound.items())
    return (statement.replace("/*work_rules_used*/", _values(used))
            .replace("/*work_flops*/", flops)
            .replace("/*work_bytes*/", nbytes)
            .replace("/*work_model_flops*/", model_flops)
            .replace("/*work_shape_values*/", shape_values))


def formulas_markdown():
    """The formulas as a markdown table, a row per op pattern (docs/work-models.md holds it)."""
    def cell(text):
        return text.replace("|", "\\|")

    lines = ["| op (regex) | family | FLOPs | bytes | model FLOPs | source |", "|---|---|---|---|---|---|"]
    for row in rules():
        model = f"`{cell(row['model_flops'])}`" if row["model_flops"] else "= FLOPs"
        nbytes = f"`{cell(row['bytes'])}`" if row["bytes"] else "NULL"
        lines.append(f"| `{cell(row['op'])}` | {row['family']} | `{cell(row['flops'])}` | {nbytes} | {model} | "
                     f"{cell(row['source'])} |")
    return "\n".join(lines) + "\n"
