"""DuckDB's format(), for Spark: a Python UDF that writes `{}` and `{:.1f}` fields as DuckDB's fmt does.

Spark's format_string is Java's printf: `%.1f` rounds half up from the shortest decimal form of a
double (0.25 gives 0.3, 2.675 gives 2.68), where fmt rounds the double's exact binary value, ties
to even (0.2, 2.67); and `%s` of a double writes 1.0E7 where fmt writes 10000000.0. Python's
format rounds and writes doubles as fmt does, so the finding rules' titles and details come out
letter for letter the same.

Spark pickles this module's function by value to run it on its executors, so it imports the
standard library only.
"""

UDF_NAME = "tk_format"


def duckdb_format(template, *values):
    """format(template, values...) as DuckDB computes it: NULL when any value is NULL."""
    if template is None or any(value is None for value in values):
        return None
    return template.format(*[("true" if value else "false") if isinstance(value, bool) else value
                             for value in values])
