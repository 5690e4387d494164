"""Postgres stores and read-side queries, and the export writers (pyarrow)."""
