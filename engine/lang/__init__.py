"""The rule language: rule files validated and compiled once, safe expressions, the fact dictionary,
and the semantic lint.
"""
