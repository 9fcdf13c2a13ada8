"""Ingest: a trace file (JSON, gzip, any layout) read, checked and loaded into the database's tables."""
