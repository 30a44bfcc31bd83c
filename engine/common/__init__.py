"""Shared plumbing with no knowledge of rules or plans: YAML reading with line numbers, atomic writes,
the caches shared between processes (keyed by content), the en/zh message catalog, package paths,
value formatting and GC tuning.
"""
