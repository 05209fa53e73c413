"""Commands that only read or plan start without torch or Ray (they are imported when
something trains, or runs on Ray); the results contract imports neither."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from sweep_helpers import TINY, cli, write_sweep

ROOT = Path(__file__).resolve().parents[1]
QUICK = str(ROOT / "search_spaces" / "quick.yaml")


def _heavy_modules_after(argv: list[str]) -> tuple[int, list[str]]:
    code = ("import sys\nfrom sweeper.cli import main\n"
            "try:\n    rc = main(sys.argv[1:])\nexcept SystemExit as exc:\n    rc = exc.code\n"
            "heavy = sorted({m.split('.')[0] for m in sys.modules} & {'torch', 'ray'})\n"
            "print('RC', rc, 'HEAVY', ','.join(heavy), file=sys.stderr)")
    out = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True,
                         cwd=ROOT, timeout=120)
    line = [ln for ln in out.stderr.splitlines() if ln.startswith("RC ")][-1].split()
    return int(line[1]), [m for m in line[3:4] if m]


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    """A real (tiny) sweep, trained here in-process: its store and its file."""
    root = tmp_path_factory.mktemp("startup")
    sweep_file = write_sweep(root / "tiny.yaml", TINY)
    rc, _, err = cli(["run", str(sweep_file), "--results", str(root), "--executor", "local"])
    assert rc == 0, err
    return root


@pytest.mark.parametrize("argv", [
    ["--help"], ["tasks"], ["plan", QUICK, "--results", "{results}", "--no-estimate"],
    ["status", "{results}/tiny.yaml", "--results", "{results}"], ["status", "{results}/tiny"],
    ["query", "{results}/tiny", "--where", "task.cooccurrence == 0.5"],
    ["phase", "{results}/tiny", "--x", "task.cooccurrence", "--y", "seed", "--facet", "none",
     "-o", "{results}/phase.png"],
    ["report", "{results}/tiny", "-o", "{results}/report.html"],
    ["compact", "{results}/tiny"],
], ids=lambda argv: argv[0])
def test_reading_and_planning_commands_import_neither_torch_nor_ray(argv, results):
    rc, heavy = _heavy_modules_after([a.format(results=results) for a in argv])
    assert rc == 0
    assert heavy == [], f"sweeper {argv[0]} imported {heavy}"
