"""Shared plumbing with no knowledge of rules or plans: YAML reading with line numbers, atomic writes,
the en/zh message catalog, package paths and value formatting.
"""
