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


def test_the_notebook_keeps_its_runs_apart_from_the_stacks():
    """Its runs default to a results root of their own (results-notebook/, ignored by git), not results/."""
    setup = nbformat.read(NOTEBOOK, as_version=4).cells[1].source
    assert 'RESULTS_ROOT = Path(os.environ.get("EKSBENCH_NOTEBOOK_RESULTS", ROOT / "results-notebook"))' in setup
    assert "/results-notebook/" in (ROOT / ".gitignore").read_text().splitlines()


@pytest.mark.local_run
def test_notebook_executes_on_the_local_backend(tmp_path, monkeypatch):
    from nbclient import NotebookClient

    class Timed(NotebookClient):
        """Notes when each stream output reaches the notebook (cell index, seconds, text)."""

        arrived: list[tuple[int, float, str]] = []

        def output(self, outs, msg, display_id, cell_index):
            if msg["msg_type"] == "stream":
                self.arrived.append((cell_index, time.monotonic(), msg["content"]["text"]))
            return super().output(outs, msg, display_id, cell_index)

    monkeypatch.setenv("EKSBENCH_NOTEBOOK_RESULTS", str(tmp_path / "results"))
    stacks_own = ROOT / "results" / "dev"
    before = set(stacks_own.glob("nb-*")) if stacks_own.is_dir() else set()
    nb = nbformat.read(NOTEBOOK, as_version=4)
    started = time.monotonic()
    Timed(nb, timeout=240, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOK.parent)}}).execute()
    seconds = time.monotonic() - started
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors
    text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    assert "/hour on demand" in text and "with exit code 0" in text and "RUN_ON_AWS is False" in text
    images = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if "image/png" in o.get("data", {})]
    assert images, "the throughput figure was not displayed inline"
    # The run cell streams: its progress lines arrive as separate outputs while the run goes on, seconds before
    # its last line (a captured run showed everything at once, at the end).
    (run_cell,) = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and "\"--local\"" in c.source]
    assert len([o for o in nb.cells[run_cell].outputs if o.output_type == "stream"]) >= 3
    arrivals = [(t, line) for i, t, chunk in Timed.arrived if i == run_cell for line in chunk.splitlines()]
    progress = [t for t, line in arrivals if "[cifar10-elastic] step" in line]
    finished = [t for t, line in arrivals if "local run finished" in line]
    assert progress and finished and finished[0] - progress[0] > 2.0, arrivals
    # ... and lands under the notebook's results root, not among the stack's own runs.
    reports = list((tmp_path / "results").glob("dev/nb-*/report.html"))
    assert len(reports) == 1 and "<h2>Throughput" in reports[0].read_text()
    assert (set(stacks_own.glob("nb-*")) if stacks_own.is_dir() else set()) == before
    print(f"notebook executed in {seconds:.1f}s")
    assert seconds < 180
