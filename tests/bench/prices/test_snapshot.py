"""The price snapshot (core/catalog/aws_prices.py) is what its own command makes of the table kept beside it, and
``eksbench prices build`` reads each format into the module every cost figure is priced from."""

from __future__ import annotations

import ast
import csv
import shlex
from pathlib import Path

import pytest

from bench.cli import main
from bench.prices.snapshot import Snapshot, render
from core.catalog import aws, aws_prices
from program.stack_files import ROOT

FIXTURES = Path(__file__).parent / "fixtures"
TABLE = ROOT / "core" / "catalog" / "sources" / "aws-on-demand.csv"


def build(capsys, *argv: str) -> tuple[int, str, str]:
    try:
        code = main(["prices", "build", *argv])
    except SystemExit as e:
        code = e.code
    out = capsys.readouterr()
    return code, out.out, out.err


def load(path: Path) -> dict:
    namespace: dict = {}
    exec(compile(path.read_text(), str(path), "exec"), namespace)  # the module as Python reads it
    return namespace


def test_the_checked_in_snapshot_is_what_its_command_makes_of_the_kept_table(capsys, monkeypatch, tmp_path):
    argv = shlex.split(aws_prices.MADE_BY)
    assert argv[:3] == ["eksbench", "prices", "build"] and "core/catalog/sources/aws-on-demand.csv" in argv
    monkeypatch.chdir(ROOT)  # the command names the table relative to the checkout
    code, out, err = build(capsys, *argv[3:], "--out", str(tmp_path / "aws_prices.py"))
    assert code == 0, err
    assert (tmp_path / "aws_prices.py").read_text() == (ROOT / "core/catalog/aws_prices.py").read_text()
    assert out.startswith(f"wrote {tmp_path / 'aws_prices.py'}: 412 prices of 28 instance types in 23 regions "
                          "(SkyPilot catalog e385a0d, after the June 2025 P4/P5 price cut)")
    assert "no price in any region: p5e.48xlarge" in out


def test_the_module_a_build_writes_says_in_its_docstring_why_it_is_one_piece():
    text = render(Snapshot(prices={("m6i.large", "us-east-1"): 0.096}, source="s", as_of="a", made_by="m"),
                  ["m6i.large"])
    doc = ast.get_docstring(ast.parse(text))
    assert "One piece: generated data, one table" in " ".join(doc.split())
    assert doc == ast.get_docstring(ast.parse((ROOT / "core/catalog/aws_prices.py").read_text()))


def test_the_kept_table_is_the_extraction_of_skypilots_catalog_and_the_snapshot_holds_its_catalog_types():
    with open(TABLE, newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 433 and len({r["instance_type"] for r in rows}) == 31
    kept = {(r["instance_type"], r["region"]): float(r["usd_per_hour"]) for r in rows
            if r["usd_per_hour"] and r["instance_type"] in aws.INSTANCE_TYPES}
    assert {(t, r): p for t, by in aws_prices.USD_PER_HOUR.items() for r, p in by.items()} == kept
    assert aws_prices.USD_PER_HOUR["p5.48xlarge"]["us-east-1"] == 55.04  # after AWS's June 2025 cut (98.32 before)
    assert aws_prices.USD_PER_HOUR["p4d.24xlarge"]["us-east-1"] == 21.957642
    assert "p5e.48xlarge" not in aws_prices.USD_PER_HOUR  # listed in 6 regions, priced in none
    assert list(aws_prices.USD_PER_HOUR) == [t for t in aws.INSTANCE_TYPES if t in aws_prices.USD_PER_HOUR]


@pytest.mark.parametrize("fixture, flags", [("vms.csv", ["--source", "SkyPilot vms.csv fixture", "--as-of", "test"]),
                                            ("table.csv", ["--source", "SkyPilot vms.csv fixture", "--as-of", "test"])])
def test_vms_csv_and_the_table_build_the_same_snapshot(capsys, tmp_path, fixture, flags):
    code, out, err = build(capsys, str(FIXTURES / fixture), *flags, "--out", str(tmp_path / "m.py"))
    assert code == 0, err
    m = load(tmp_path / "m.py")
    assert m["USD_PER_HOUR"] == {"p5.48xlarge": {"us-east-1": 55.04, "us-west-1": 68.8},
                                 "m6i.large": {"us-east-1": 0.096, "us-west-1": 0.112}}
    assert (m["SOURCE"], m["AS_OF"]) == ("SkyPilot vms.csv fixture", "test")
    assert shlex.split(m["MADE_BY"])[3:] == [str(FIXTURES / fixture), *flags]


def test_an_offer_file_dates_the_snapshot_by_its_publication(capsys, tmp_path):
    code, out, err = build(capsys, str(FIXTURES / "offer-us-east-1.csv"), "--out", str(tmp_path / "m.py"))
    assert code == 0, err
    m = load(tmp_path / "m.py")
    assert m["USD_PER_HOUR"] == {"p5.48xlarge": {"us-east-1": 55.04}, "m6i.large": {"us-east-1": 0.096}}
    assert (m["SOURCE"], m["AS_OF"]) == ("AWS Price List bulk offer files (AmazonEC2)", "published 2025-06-20")


@pytest.mark.parametrize("argv, message", [
    ([str(FIXTURES / "vms.csv")], "--source and --as-of are needed for a SkyPilot vms.csv: it does not say where"),
    ([str(FIXTURES / "missing.csv"), "--source", "s", "--as-of", "a"], "missing.csv: cannot be read (No such file"),
    ([str(Path(__file__)), "--source", "s", "--as-of", "a"], "test_snapshot.py: not a price file eksbench reads"),
])
def test_a_build_that_cannot_be_made_is_one_line_and_writes_nothing(capsys, tmp_path, argv, message):
    code, out, err = build(capsys, *argv, "--out", str(tmp_path / "m.py"))
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and message in err, err
    assert not (tmp_path / "m.py").exists()


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "one-long-line"])
def test_a_file_that_is_a_pipe_a_device_or_one_endless_line_is_refused_at_once(capsys, tmp_path, kind,
                                                                              hostile_file):
    """A named pipe with no writer hung the build for ever; /dev/zero or 1 GiB with no line break took 1 GiB."""
    import signal
    import tracemalloc

    path = tmp_path / "prices.csv"
    hostile_file(path, kind, b"instance_type,region,usd_per_hour," + b"x" * (64 << 20))
    def stuck(*_):
        raise TimeoutError(f"prices build of a {kind} did not return")

    before = signal.signal(signal.SIGALRM, stuck)
    signal.alarm(20)
    tracemalloc.start()
    try:
        code, out, err = build(capsys, str(path), "--source", "s", "--as-of", "a", "--out", str(tmp_path / "m.py"))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        signal.alarm(0)
        signal.signal(signal.SIGALRM, before)
    expected = {"fifo": "is a named pipe (FIFO), not a regular file; a price file is a CSV file",
                "dev-zero": "is a character device, not a regular file",
                "one-long-line": "line 1 is longer than 1048576 characters"}[kind]
    assert code == 2 and expected in err and len(err.strip().splitlines()) == 1, err
    assert peak < 16 << 20 and not (tmp_path / "m.py").exists()


@pytest.mark.parametrize("kind", ["fifo", "link", "device"])
def test_a_build_never_puts_the_module_in_place_of_a_pipe_a_link_or_a_device(capsys, tmp_path, kind):
    """--out /dev/full replaced the device with the module (as root); a named pipe or a link went the same way."""
    import os

    out = {"fifo": tmp_path / "fifo.py", "link": tmp_path / "link.py", "device": tmp_path / "null"}[kind]
    if kind == "fifo":
        os.mkfifo(out)
    elif kind == "link":
        out.symlink_to(tmp_path / "elsewhere.py")
    else:  # a null device of its own (as root), never the machine's /dev/null
        try:
            os.mknod(out, 0o600 | __import__("stat").S_IFCHR, os.makedev(1, 3))
        except PermissionError:
            pytest.skip("making a device node needs root")
    code, _, err = build(capsys, str(FIXTURES / "table.csv"), "--source", "s", "--as-of", "a", "--out", str(out))
    assert code == 2 and "not a regular file; give a file's path" in err and len(err.strip().splitlines()) == 1
    assert out.is_fifo() if kind == "fifo" else (out.is_symlink() if kind == "link" else out.is_char_device())
    assert not (tmp_path / "elsewhere.py").exists()


def test_a_build_that_cannot_write_leaves_nothing_beside_the_module(capsys, tmp_path):
    """A failed write left ``.aws_prices.py.<pid>.tmp`` in the package folder after every failure."""
    out = tmp_path / "catalog" / "aws_prices.py"
    out.mkdir(parents=True)  # the module's name taken by a folder: the rename fails
    code, _, err = build(capsys, str(FIXTURES / "table.csv"), "--source", "s", "--as-of", "a", "--out", str(out))
    assert code == 2 and "cannot be written" in err
    assert sorted(p.name for p in out.parent.iterdir()) == ["aws_prices.py"]


def test_a_snapshot_edited_to_hold_an_absurd_price_prices_nothing_with_it(monkeypatch):
    monkeypatch.setitem(aws_prices.USD_PER_HOUR, "p3.16xlarge", {"us-west-2": 1e308, "us-east-1": float("inf")})
    assert aws.usd_per_hour("p3.16xlarge", "us-west-2") is None and aws.usd_per_hour("p3.16xlarge", "us-east-1") is None
