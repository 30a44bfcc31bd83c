"""The package version as every plan records it.

pyproject.toml's [project] version, kept here so that a plan need not import importlib.metadata
(~15 ms per process); tests/test_packaging.py checks that the two agree and that the installed
metadata says the same."""

VERSION = "0.1.0"
