"""Wheel smoke test (`make smoke`, part of `make test`): build the wheel, install it into a fresh
virtual environment that borrows only the dependencies from .venv, and run `servewise plan`
through the installed console script from outside the source tree."""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "chat-8b-small.yaml"


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="servewise-smoke-") as tmp_dir:
        tmp = Path(tmp_dir)
        pip = [sys.executable, "-m", "pip", "--quiet", "--disable-pip-version-check"]
        # setuptools builds in ROOT/build (git-ignored) and keeps what an earlier build copied there:
        # a rule file since moved or deleted would ship in the wheel again, as a duplicate rule
        shutil.rmtree(ROOT / "build", ignore_errors=True)
        subprocess.run([*pip, "wheel", "--no-deps", "-w", str(tmp / "dist"), str(ROOT)], check=True)
        wheel = next((tmp / "dist").glob("servewise-*.whl"))
        venv = tmp / "venv"
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
        py = venv / "bin" / "python"
        subprocess.run([*pip, "--python", str(py), "install", "--no-deps", str(wheel)], check=True)
        site = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                              check=True, capture_output=True, text=True).stdout.strip()
        # the dependencies from .venv, appended after the venv's own site-packages (a plain path:
        # .venv's .pth files, among them the editable servewise, are not processed)
        Path(site, "servewise-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n", encoding="utf-8")
        out = subprocess.run([str(venv / "bin" / "servewise"), "plan", str(EXAMPLE), "--format", "json"],
                             capture_output=True, text=True, cwd=tmp)
        where = subprocess.run([str(py), "-c", "import servewise.engine as e; print(e.__file__)"],
                               capture_output=True, text=True, cwd=tmp).stdout.strip()
        if out.returncode != 0 or '"feasible": true' not in out.stdout or not where.startswith(str(venv)):
            print(f"wheel smoke test FAILED (exit {out.returncode}; engine from {where})\n{out.stderr}")
            return 1
        print(f"wheel smoke test ok: {wheel.name} installed, `servewise plan` ran from {venv.name}/bin")
    return 0


if __name__ == "__main__":
    sys.exit(main())
