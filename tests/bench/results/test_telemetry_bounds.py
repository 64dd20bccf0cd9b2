"""Hostile telemetry, end to end: a sample time no datetime holds, more GPU entries than a call keeps, and power or
energy below zero, in ``results.telemetry``, ``results.load``, ``eksbench report``, ``status`` and ``compare``."""

from __future__ import annotations

import json
import tracemalloc
import warnings

import pytest

import bench.results.hardware as T
from bench import results
from tests.bench.results.test_telemetry_frames import gpu_run

pytestmark = pytest.mark.hostile


def node_file(exp, node: str, lines: list[dict]) -> None:
    (exp / "telemetry").mkdir(parents=True, exist_ok=True)
    (exp / "telemetry" / f"{node}.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))


def caught(call, *args, **kwargs):
    """(what ``call`` gave, the messages of the warnings it gave)."""
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        out = call(*args, **kwargs)
    return out, [str(w.message) for w in said]


def test_a_sample_time_no_datetime_holds_is_no_time_with_one_warning_naming_the_file(tmp_path):
    """Before: ``OutOfBoundsDatetime`` from ``results.telemetry`` and ``eksbench report`` for ``t = 1e15``."""
    from bench.cli import main

    exp = gpu_run(tmp_path, seconds=2, nodes=("node-0",))
    node_file(exp, "node-1", [{"t": 1e15, "gpus": [{"index": 0, "power_w": 300.0}]},
                              {"t": -1e15, "gpus": [{"index": 0, "power_w": 300.0}]},
                              {"t": 1.8e9, "gpus": [{"index": 0, "power_w": 300.0}]}])
    node_file(exp, "node-2", [{"t": 1e15, "gpus": [{"index": 0}]}])  # no time at all: nothing to draw
    tl, said = caught(results.telemetry, str(tmp_path / "dev"))
    times = tl[tl["node"] == "node-1"]["t"]
    assert times.isna().sum() == 2 and str(times.dropna().iloc[0]) == "2027-01-15 08:00:00+00:00"
    assert tl[tl["node"] == "node-0"]["t"].notna().all() and tl[tl["node"] == "node-2"]["t"].isna().all()
    node1 = [w for w in said if "node-1.jsonl" in w]
    assert len(node1) == 1 and "2 sample time(s) outside 1970-9999 (e.g. t=1000000000000000.0): no time" in node1[0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["report", str(tmp_path / "dev"), "--out", str(tmp_path / "r.html")]) == 0
    assert "Hardware" in (tmp_path / "r.html").read_text()


def test_many_empty_gpu_entries_keep_at_most_the_row_limit_with_one_warning(tmp_path, monkeypatch):
    exp = gpu_run(tmp_path, seconds=1, nodes=("node-0",))  # 2 GPUs x 3 samples
    node_file(exp, "node-1", [{"t": 1.8e9 + i, "gpus": [{}] * 4_000} for i in range(3)])
    node_file(exp, "node-2", [{"t": 1.8e9, "gpus": [{}] * 10}])
    monkeypatch.setattr(T, "MAX_TELEMETRY_ROWS", 10_000)
    tl, said = caught(results.telemetry, str(tmp_path / "dev"))
    assert len(tl) == 10_000 and (tl["node"] == "node-1").sum() == 10_000 - 6 and "node-2" not in set(tl["node"])
    assert set(tl[tl["node"] == "node-1"]["device"]) == {"gpu?"}
    assert len(said) == 1 and "node-1.jsonl: telemetry rows stop here (at most 10,000 a call)" in said[0]


def test_a_gpu_index_no_node_has_reads_as_none_so_names_stay_few(tmp_path):
    exp = tmp_path / "dev" / "r1" / "e"
    node_file(exp, "node-0", [{"t": 1.8e9, "gpus": [{"index": i} for i in (0, 7, 256, 1e9, -1, 2.5)]}])
    (exp / "summary.json").write_text(json.dumps({"experiment": "e", "status": "succeeded"}))
    tl, said = caught(results.telemetry, str(tmp_path / "dev"))
    assert tl["device"].tolist() == ["gpu0", "gpu7", "gpu?", "gpu?", "gpu?", "gpu?"]
    assert len(said) == 1 and "4 GPU index(es) not a whole number from 0 to 255 (e.g. 256): read as gpu?" in said[0]


def test_reading_telemetry_holds_its_stated_bytes_a_row(tmp_path):
    """``ROW_BYTES`` a row at the call's peak (what Python and numpy allocate: tracemalloc). Before: each row a
    tuple of 17 and its floats and device name, about 600 bytes, so 5,000,000 rows took 2.7 GB."""
    rows = 30_000
    exp = tmp_path / "st" / "r1" / "e"
    node_file(exp, "node-0", [{"t": 1.8e9 + i, "gpus": [{}] * 3_000} for i in range(rows // 3_000)])
    (exp / "summary.json").write_text(json.dumps({"experiment": "e", "status": "succeeded"}))
    caught(results.telemetry, str(tmp_path / "nothing-yet"), strict=False)  # imports and first-call caches: not counted
    tracemalloc.start()
    try:
        tl = results.telemetry(str(tmp_path / "st"))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(tl) == rows
    assert peak / rows < T.ROW_BYTES, f"{peak / rows:.0f} bytes a row"


def negative_energy_run(root):
    """``root/dev/run-1/resnet``: a GPU run whose summary says energy -3.6e6 J (-1 kWh), mean power -400 W (at 128
    samples/s: -3.125 J a sample) and energy to accuracy -5 J, and whose samples say -500 W and -1 J."""
    exp = gpu_run(root, seconds=2, nodes=("node-0",), rate=128.0)
    summary = json.loads((exp / "summary.json").read_text())
    summary["telemetry"].update(energy_j=-3.6e6, power_mean_w=-400.0, energy_to_accuracy_j=-5.0)
    (exp / "summary.json").write_text(json.dumps(summary))
    node_file(exp, "node-1", [{"t": 1.8e9, "gpus": [{"index": 0, "power_w": -500.0, "energy_j": -1.0}]}])
    return exp


NEGATIVE = ("-3.12", "-3.13", "-3,600,000", "-3600000 J", "-1 kWh", "-1.0 kWh", "-400 W", "-400.0 W", "-5 J")


def test_a_negative_energy_or_power_is_never_shown_as_a_figure(tmp_path, capsys):
    """Before the summary was checked: ``-3.12 J/sample -1 kWh`` in status, ``A -3.12 J/sample`` in compare,
    ``-3,600,000 J (-1 kWh)`` in the report; and the samples' -500 W was drawn and given by ``results.telemetry``."""
    from bench.cli import main

    dev, other = (negative_energy_run(tmp_path / side).parent.parent for side in ("a", "b"))
    df, _ = caught(results.load, str(dev))
    assert df[["energy_j", "kwh", "power_mean_w", "joules_per_sample", "energy_to_accuracy_j"]].isna().all().all()
    tl, said = caught(results.telemetry, str(dev))
    assert (tl["power_w"].dropna() >= 0).all() and (tl["energy_j"].dropna() >= 0).all()
    assert any("node-1.jsonl: 2 power or energy reading(s) below zero (e.g. -500.0): no measurement" in w
               for w in said)
    capsys.readouterr()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["status", "dev", "--results-root", str(tmp_path / "a")]) == 0
        assert main(["compare", str(dev / "run-1"), str(other / "run-1")]) == 0
        assert main(["report", str(dev), "--out", str(tmp_path / "r.html")]) == 0
    shown = capsys.readouterr().out + (tmp_path / "r.html").read_text()
    assert "resnet" in shown and not [n for n in NEGATIVE if n in shown]
