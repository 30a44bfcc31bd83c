"""Packaging: every folder of the installed layout is declared (no setuptools discovery warnings,
no dropped data files), and the message catalog is complete in both languages."""

from __future__ import annotations

import string

import pytest
from conftest import ROOT

TOP = {"engine": "servewise.engine", "cli": "servewise.cli", "facts": "servewise.facts", "rules": "servewise.rules"}


def test_every_folder_is_a_declared_package():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    declared = set(config["packages"])
    assert config["package-dir"] == {v: k for k, v in TOP.items()}
    found = set()
    for top, package in TOP.items():
        for folder in [ROOT / top, *(ROOT / top).rglob("*")]:
            if folder.is_dir() and folder.name != "__pycache__" and any(p.is_file() for p in folder.iterdir()):
                rel = folder.relative_to(ROOT / top).parts
                found.add(".".join((package, *rel)))
    assert found == declared, f"undeclared: {sorted(found - declared)}; missing: {sorted(declared - found)}"


def test_cli_messages_have_both_languages_and_the_same_placeholders():
    from servewise.engine.common.messages import catalog, message

    for code, texts in catalog().items():
        assert set(texts) >= {"en", "zh"}, code
        fields = [{f for _, f, _, _ in string.Formatter().parse(texts[lang]) if f} for lang in ("en", "zh")]
        assert fields[0] == fields[1], code
    assert message("output.is_dir", "zh", path="x") == "x：是文件夹；请给出文件名"


def test_the_version_plans_record_is_the_package_version():
    import importlib.metadata

    import tomllib

    from servewise.engine.app.plan import servewise_version
    from servewise.engine.common.version import VERSION

    declared = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
    assert servewise_version() == VERSION == declared == importlib.metadata.version("servewise")
