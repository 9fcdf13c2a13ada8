"""Analysis over the tables: kernel classes, named queries and ad hoc SQL, finding rules, trace diffs."""
