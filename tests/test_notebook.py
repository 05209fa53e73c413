"""docs/python-api.md as a notebook: its Python code blocks, in order, executed in a real Jupyter
kernel (ipykernel's python3, on this interpreter) with nbclient; the objects the page shows
must come out as HTML (SweepResult, Results, PhaseDiagram with its figure inline) and the
`.plot()` calls as PNG images.

The blocks run as written, in a temporary folder, except that the sweep file's path
(`search_spaces/quick.yaml`, relative to the repository) is made absolute."""

from __future__ import annotations

import base64
import os
import re
import sys
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")  # the dev extra has them; skip where absent
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "python-api.md"
KERNEL_TIMEOUT_S = 240  # per cell: the first one trains the page's small sweep


def doc_blocks() -> list[str]:
    """The page's ```python blocks, in order (its plain ``` blocks are outputs)."""
    return re.findall(r"^```python\n(.*?)^```$", DOC.read_text(), flags=re.M | re.S)


def _notebook(blocks: list[str]):
    quick = str(REPO / "search_spaces" / "quick.yaml")
    cells = [nbformat.v4.new_code_cell(b.replace('"search_spaces/quick.yaml"', repr(quick)))
             for b in blocks]
    return nbformat.v4.new_notebook(cells=cells)


@pytest.fixture(scope="module")
def executed(tmp_path_factory):
    """The page run as a notebook, then one more cell printing the kernel's interpreter:
    (the page's blocks, the executed notebook)."""
    blocks = doc_blocks()
    notebook = _notebook(blocks)
    notebook.cells.append(nbformat.v4.new_code_cell("import sys\nprint(sys.executable)"))
    folder = tmp_path_factory.mktemp("notebook")
    client = nbclient.NotebookClient(notebook, timeout=KERNEL_TIMEOUT_S, kernel_name="python3",
                                     resources={"metadata": {"path": str(folder)}})
    with pytest.MonkeyPatch.context() as patch:  # the kernel imports this checkout's sweeper
        patch.setenv("PYTHONPATH", os.pathsep.join(
            filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
        client.execute()  # a failing block raises CellExecutionError, naming it
    return blocks, notebook


def _output(notebook, blocks: list[str], starts: str) -> dict:
    """The data of the execute_result of the block that starts with `starts`."""
    index = next(i for i, b in enumerate(blocks) if b.lstrip().startswith(starts))
    results = [o for o in notebook.cells[index].outputs if o.output_type == "execute_result"]
    assert results, f"block {index} ({starts!r}) shows nothing"
    return results[0]["data"]


@pytest.mark.slow
def test_every_block_of_the_python_api_page_runs_in_a_kernel(executed):
    blocks, notebook = executed
    assert len(blocks) >= 6
    for cell in notebook.cells:
        assert not [o for o in cell.outputs if o.output_type == "error"], cell.source
    # ipykernel's python3 kernel ran on this interpreter (the "python" of its kernel.json is
    # replaced by jupyter_client with sys.executable), not another Python on the machine
    printed = "".join(o.get("text", "") for o in notebook.cells[-1].outputs)
    assert Path(printed.strip()) == Path(sys.executable)


@pytest.mark.slow
def test_the_pages_objects_show_as_html_and_plots_as_images(executed):
    blocks, notebook = executed
    result = _output(notebook, blocks, "import sweeper, analysis")
    assert "text/html" in result and "<strong>SweepResult</strong>" in result["text/html"]
    assert "quick_small: ran 8 trials" in result["text/html"]
    loaded = _output(notebook, blocks, "res = result.load()")
    assert "<strong>Results</strong> of sweep &#x27;quick_small&#x27;" in loaded["text/html"]
    phase = _output(notebook, blocks, "phase = analysis.phase_from_results")
    assert "<strong>PhaseDiagram</strong>" in phase["text/html"]
    assert "src='data:image/png;base64," in phase["text/html"]
    for call in ("phase.plot()", 'res.plot("attn_acc"'):
        shown = _output(notebook, blocks, call)
        assert base64.b64decode(shown["image/png"]).startswith(b"\x89PNG"), call
