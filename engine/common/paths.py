"""Where the installed package keeps its folders: one home for every path the engine reads."""

from __future__ import annotations

from pathlib import Path

PACKAGE_ROOT = Path(__file__).resolve().parents[2]  # the folder holding engine/, facts/, rules/, cli/
ENGINE_DIR = PACKAGE_ROOT / "engine"
FACTS_DIR = PACKAGE_ROOT / "facts"
RULES_DIR = PACKAGE_ROOT / "rules"
