"""sweeper.families.copy.probes: the readout probe from a sweep file, and its bad input."""

from __future__ import annotations

import subprocess
import sys

from sweep_helpers import REPO, TINY, variant, write_sweep

from sweeper.families.copy.probes import MEASURES


def _probe(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sweeper.families.copy.probes", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=300)


def test_probe_prints_each_cell_and_step_of_a_copy_sweep(tmp_path):
    sweep = variant(TINY, **{"axes": {"model": {"output_bias": {"grid": ["default",
                                                                         "log_frequency"]}}},
                             "fixed.task.hardness": 1.0, "fixed.task.cooccurrence": 1.0})
    out = _probe(str(write_sweep(tmp_path / "s.yaml", sweep)), "--seeds", "2", "--steps", "0,3")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert "never_target_mass" in lines[0] and "saturated" in lines[0]
    rows = [line.split() for line in lines[1:]]
    assert [(r[0], r[1], r[2]) for r in rows] == [("default", "0", "2"), ("default", "3", "2"),
                                                  ("log_frequency", "0", "2"),
                                                  ("log_frequency", "3", "2")]
    # at h = 1, c = 1 the never-target classes start with most of nn.Linear's probability and
    # almost none of the log-frequency init's
    mass = 3 + 2 * MEASURES.index("never_target_mass")  # each measure: median, (range)
    assert float(rows[0][mass]) > 0.3 and float(rows[2][mass]) < 0.01


def test_probe_refuses_another_family_and_bad_steps_in_one_line(tmp_path):
    topic = write_sweep(tmp_path / "t.yaml", (REPO / "search_spaces/lu_topic.yaml").read_text())
    out = _probe(str(topic), "--steps", "0")
    assert out.returncode == 2 and out.stdout == ""
    assert len(out.stderr.splitlines()) == 1 and "allowed" in out.stderr
    out = _probe(str(topic), "--steps", "ten")
    assert out.returncode == 2 and len(out.stderr.splitlines()) == 1
    assert "--steps" in out.stderr and "allowed" in out.stderr


def test_sos_never_target_moves_only_sos_initial_share():
    from sweeper.families.copy.probes import readout_saturation
    from sweeper.spec import make_spec

    specs = [make_spec("copy-v1", "seq2seq", {"length": 8, "cooccurrence": 0.0},
                       {"width": 16, "output_bias": "default"}, {"batch_size": 16}, seed=s)
             for s in range(2)]
    as_built = readout_saturation(specs, [0])
    lowered = readout_saturation(specs, [0], sos_never_target=True)
    # SOS holds about 1/(N + 2) of nn.Linear's initial probability; at log 1e-4 next to the
    # others' mean, about 1e-4; attention (which the readout bias cannot reach) is unchanged
    assert (as_built["never_target_mass"] > 0.05).all()
    assert (lowered["never_target_mass"] < 1e-3).all()
    assert as_built["attn_acc"].tolist() == lowered["attn_acc"].tolist()
