"""Turn benchmarks/ecop_compare.py results into a sweep folder: ``benchmarks/to_sweep.py`` with the ``ecop``
reader (same options; kept so that existing command lines work).

    .venv/bin/python benchmarks/ecop_to_sweep.py examples/sweeps/ecop_table.yaml \\
        --out benchmarks/results/sweeps/ecop_table --source HumanoidRun=table_humanoidrun_100k ...
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from to_sweep import BASE_CFG, case_settings, check_source, convert  # noqa: E402, F401
from to_sweep import RESULTS as _ROOT  # noqa: E402
from to_sweep import main as _main  # noqa: E402

RESULTS = _ROOT / "ecop"


def main(argv: list[str] | None = None) -> None:
    _main(argv, reader="ecop")


if __name__ == "__main__":
    main()
