"""Build hook: ship the repository's ``examples/`` folder inside the package as ``bayescrl/_examples``.

Everything else is in ``pyproject.toml``. ``bayescrl examples list`` / ``bayescrl examples copy DIR`` read
the shipped copy (wheels) or, in a source checkout / editable install, ``examples/`` itself.
"""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

SKIP = shutil.ignore_patterns("__pycache__", "*.pyc", ".*")


class BuildPyWithExamples(build_py):
    def run(self):
        super().run()
        src = Path(__file__).resolve().parent / "examples"
        if src.is_dir():
            dst = Path(self.build_lib) / "bayescrl" / "_examples"
            shutil.rmtree(dst, ignore_errors=True)
            shutil.copytree(src, dst, ignore=SKIP)


setup(cmdclass={"build_py": BuildPyWithExamples})
