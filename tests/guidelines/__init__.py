"""Tests named after guideline ids (package: keeps its conftest apart from tests/conftest.py)."""
