"""The rule language: rule files validated and compiled once, safe expressions, the fact dictionary,
the semantic lint, and the cache of parsed rule files.
"""
