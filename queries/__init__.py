"""Named SQL queries: one query per .sql file, the stem is its name."""
