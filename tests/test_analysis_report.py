"""The HTML report: sections, embedded figures, and numbers taken from the phase object."""

from __future__ import annotations

import base64
import io
import re
from html.parser import HTMLParser

import pandas as pd
from PIL import Image

from analysis import compute_phase, load, with_outcomes
from analysis.cli import main
from analysis.phase import outcome_trajectories
from analysis.report import cell_digits, cells_table, fmt_number

try:
    from analysis_fixtures import copy_report, store  # noqa: F401
except ImportError:  # tests/ imported as a package
    from tests.analysis_fixtures import copy_report, store  # noqa: F401


class Page(HTMLParser):
    """Sections (id -> title, tables of cell texts), images, scripts and links."""

    def __init__(self, text: str):
        super().__init__()
        self.sections: dict[str, dict] = {}
        self.images: list[dict] = []
        self.tags: set[str] = set()
        self._section = None
        self._open: list[list] = []  # the tables being read, innermost last
        self._cells: list[tuple[list, list[str]]] = []  # open cells: (their row, their text)
        self._in_h2 = False
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.tags.add(tag)
        if tag == "section":
            self._section = self.sections.setdefault(attrs["id"], {"title": "", "tables": []})
        elif tag == "h2":
            self._in_h2 = True
        elif tag == "img":
            self.images.append(attrs)
        elif tag == "table" and self._section is not None:
            self._section["tables"].append([])
            self._open.append(self._section["tables"][-1])  # a table may hold tables
        elif tag == "tr" and self._section is not None:
            self._open[-1].append([])
        elif tag in ("td", "th") and self._open:
            self._cells.append((self._open[-1][-1], []))

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cells:
            row, text = self._cells.pop()
            row.append("".join(text))
        elif tag == "table" and self._open:
            self._open.pop()
        elif tag == "h2":
            self._in_h2 = False
        elif tag == "section":
            self._section = None

    def handle_data(self, data):
        if self._cells:
            for _, text in self._cells:  # a cell's text includes a table inside it
                text.append(data)
        elif self._in_h2 and self._section is not None:
            self._section["title"] += data


def test_report_has_every_section(copy_report):
    page = Page(copy_report[0].html)
    # the answer first (the map, the recovery beyond a lottery), the run's record last
    assert list(page.sections) == ["phase", "lottery", "counts", "trajectories", "onsets",
                                   "seeds", "failed", "cells", "manifest"]
    assert page.sections["phase"]["title"] == ("Phase diagram: success = attention learned: "
                                               "best head's attention accuracy ≥ 0.9")
    assert copy_report[1].read_text(encoding="utf-8") == copy_report[0].html


def test_lottery_section_shows_the_phase_objects_lottery_and_heads_aligned(copy_report):
    report = copy_report[0]
    section = Page(report.html).sections["lottery"]
    lottery, aligned = section["tables"]
    assert len(lottery) - 1 == len(report.phase.lottery)  # a header row, then one per cell
    assert lottery[0][:3] == ["model.heads", "task.cooccurrence", "task.hardness"]
    assert "ix" not in lottery[0] and "iy" not in lottery[0]  # the grid's indices: internal
    beyond = int(report.phase.lottery["beyond_lottery"].sum())
    assert f"{beyond} of {len(report.phase.lottery)} cells beyond the lottery" in report.html
    assert aligned[0][:4] == ["model.heads", "task.cooccurrence", "task.hardness", "n"]
    assert "lottery" in report.figures


def test_report_is_self_contained(copy_report):
    text = copy_report[0].html
    page = Page(text)
    assert "http://" not in text and "https://" not in text and "url(" not in text
    assert not page.tags & {"script", "link", "iframe", "object", "embed"}
    assert "Content-Security-Policy" in text and "default-src 'none'" in text


def test_every_figure_is_embedded_and_decodes(copy_report):
    report, _ = copy_report
    page = Page(report.html)
    assert len(page.images) == len(report.figures) == 6
    assert "trial_regimes" in report.figures  # copy's regime map
    for img in page.images:
        prefix = "data:image/png;base64,"
        assert img["src"].startswith(prefix) and img["alt"]
        with Image.open(io.BytesIO(base64.b64decode(img["src"][len(prefix):]))) as image:
            assert image.format == "PNG"
            assert image.size == (int(img["width"]), int(img["height"]))


def test_cells_table_numbers_come_from_the_phase_object(copy_report):
    report, _ = copy_report
    rows = Page(report.html).sections["cells"]["tables"][0]
    expected = cells_table(report.phase)
    digits = cell_digits(report.phase)
    assert len(rows) == len(expected) + 1
    header = rows[0]
    assert header[:4] == ["model.heads", "task.cooccurrence", "task.hardness", "trials"]
    assert header[-1] == "seeds"  # each cell links to its seeds' panel
    for shown, (_, row) in zip(rows[1:], expected.iterrows(), strict=True):
        assert shown[:-1] == [fmt_number(row[c], digits.get(c, 3)) for c in expected.columns]


def test_phase_object_matches_an_independent_computation(store, copy_report):
    res = load(store, "copy")
    trials = with_outcomes(res.trials, outcome_trajectories(res))
    again = compute_phase(trials, "task.cooccurrence", "task.hardness", "model.heads",
                          accuracy_threshold=0.9, outcome="attention_learned")
    pd.testing.assert_frame_equal(again.cells, copy_report[0].phase.cells)
    pd.testing.assert_frame_equal(again.boundary, copy_report[0].phase.boundary)


def test_regime_counts_and_status_counts(store, copy_report):
    report, _ = copy_report
    sections = Page(report.html).sections
    regimes = sections["phase"]["tables"][0]
    counts = report.phase.state_counts()
    assert regimes[0] == ["model.heads", *counts.columns]
    assert [[int(v) for v in r] for r in regimes[1:]] == [
        [h, *counts.loc[h].tolist()] for h in counts.index]
    status = {r[1]: int(r[2]) for r in sections["counts"]["tables"][0][1:]}
    assert status == load(store, "copy").trials["status"].value_counts().to_dict()


def test_manifest_section(copy_report):
    section = Page(copy_report[0].html).sections["manifest"]
    fields = dict(section["tables"][0][1:])
    assert fields["sweep"] == "copy" and fields["task"] == "copy-v1"
    assert fields["trials_expanded"] == "144"
    assert "# synthetic sweep copy" in copy_report[0].html


def test_topic_report_through_the_cli(store, tmp_path, capsys):
    out = tmp_path / "r" / "topic.html"
    assert main(["report", str(store / "topic"), "-o", str(out), "--threshold", "0.9"]) == 0
    assert capsys.readouterr().out.startswith(f"wrote {out}: 144 trials, 48 cells, 3 figures")
    page = Page(out.read_text(encoding="utf-8"))
    assert list(page.sections) == ["phase", "counts", "trajectories", "seeds", "failed",
                                   "cells", "manifest"]
    assert page.sections["phase"]["title"] == ("Phase diagram: success = learned: token "
                                               "accuracy ≥ 0.9")
    assert len(page.images) == 3
    assert page.sections["cells"]["tables"][0][0][0] == "model.classifier"


def test_each_phase_cell_links_to_its_seeds_panel(copy_report):
    """The phase figure's image map and the cells table link every sampled cell to a panel
    of its seeds' curves in the same page (static anchors), each seed coloured by outcome."""
    report, _ = copy_report
    text, phase = report.html, report.phase
    sampled = phase.cells[phase.cells["n_trials"] > 0]
    areas = re.findall(r"<area shape='rect' coords='(\d+),(\d+),(\d+),(\d+)' "
                       r"href='#(seeds-\d+)'", text)
    assert len(areas) == len(sampled)
    for x0, y0, x1, y1, anchor in areas:
        assert int(x1) > int(x0) and int(y1) > int(y0)
        assert f"<div class='seeds' id='{anchor}'>" in text
    assert "usemap='#phase-cells'" in text
    panel = text[text.index("id='seeds-0'"):]
    panel = panel[:panel.index("</div>")]
    assert panel.count("<svg") == 2  # token accuracy and attention accuracy
    assert "<polyline" in panel and "stroke-dasharray='2 2'" in panel  # curves and threshold


def test_failed_trials_are_listed_with_their_errors(copy_report):
    report, _ = copy_report
    section = Page(report.html).sections["failed"]
    assert section["tables"], "the copy fixture has failed trials"
    rows = section["tables"][0]
    assert rows[0][0] == "trial_id" and rows[0][-1] == "error"
    assert all("worker died (synthetic)" in row[-1] for row in rows[1:])
