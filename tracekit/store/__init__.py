"""The database: its schema (sql/), what tracekit knows about GPUs (knowledge/), and how it is opened."""
