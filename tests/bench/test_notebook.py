"""notebooks/benchmark.ipynb: committed without outputs, and it runs end to end on the local backend."""

from __future__ import annotations

import time

import nbformat
import pytest

from tests.bench.conftest import ROOT

NOTEBOOK = ROOT / "notebooks" / "benchmark.ipynb"


def test_notebook_is_committed_without_outputs():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code, "the notebook has no code cells"
    dirty = [i for i, c in enumerate(code) if c.outputs or c.execution_count is not None]
    assert not dirty, f"code cells {dirty} have outputs: clear them before committing"


def test_cloud_cell_is_off_by_default():
    source = "\n".join(c.source for c in nbformat.read(NOTEBOOK, as_version=4).cells)
    assert "RUN_ON_AWS = False" in source and "if RUN_ON_AWS:" in source


@pytest.mark.local_run
def test_notebook_executes_on_the_local_backend(tmp_path, monkeypatch):
    from nbclient import NotebookClient

    monkeypatch.setenv("EKSBENCH_NOTEBOOK_RESULTS", str(tmp_path / "results"))
    nb = nbformat.read(NOTEBOOK, as_version=4)
    started = time.monotonic()
    NotebookClient(nb, timeout=240, kernel_name="python3",
                   resources={"metadata": {"path": str(NOTEBOOK.parent)}}).execute()
    seconds = time.monotonic() - started
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors
    text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    assert "/hour on demand" in text and "with exit code 0" in text and "RUN_ON_AWS is False" in text
    images = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if "image/png" in o.get("data", {})]
    assert images, "the throughput figure was not displayed inline"
    reports = list((tmp_path / "results").glob("dev/nb-*/report.html"))
    assert len(reports) == 1 and "<h2>Throughput" in reports[0].read_text()
    print(f"notebook executed in {seconds:.1f}s")
    assert seconds < 180
