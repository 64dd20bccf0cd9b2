"""Text from a run that cannot be shown as it is: times no calendar can show, log lines of megabytes,
characters that reorder or hide what a terminal shows, and names longer than a file system holds.

A summary whose ``started_at`` is in year 0 or 10000 in UTC, a node log whose middle is one 64 MB
progress line redrawn with carriage returns, a status, a folder name or a log line holding U+202E
(right-to-left override), U+200B (zero-width space) or an escape sequence, and a 300-character run id:
``status``, ``logs``, ``report``, ``compare``, ``results.load`` and ``automation.logs`` each show them
escaped, cut or refused in one line, never raw and never with a traceback.
"""

from __future__ import annotations

import json
import re
import tracemalloc
from pathlib import Path

import pytest

from program.stack_files import ROOT
from tests.bench.commands.test_observe import no_pulumi  # noqa: F401 - autouse: no Pulumi CLI answers
from tests.bench.conftest import summary, write_experiment

pytestmark = pytest.mark.hostile

EXPERIMENT = "resnet50-synthetic"  # an experiment of Pulumi.dev.yaml
EARLY, LATE = "0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-14:00"  # year 0 and year 10000 in UTC
# Every character a terminal must not receive raw: bidirectional embeddings, overrides and isolates, marks,
# zero-width characters, the byte-order mark, line and paragraph separators, C0 (but newline and tab), DEL, C1.
HOSTILE = ("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200b\u200c\u200d\u200e\u200f\u061c\u2060"
           "\ufeff\u2028\u2029" + "".join(map(chr, [*range(0, 9), *range(11, 32), *range(127, 160)])))
ESC = "\x1b]52;c;aGVsbG8=\x07\x1b[2J"  # OSC 52 writes the clipboard; CSI 2J clears the screen
LONG_ID = "x" * 300
IN_A_NAME = HOSTILE.replace("\x00", "")  # a folder name holds any byte but NUL and "/"
IN_A_LINE = HOSTILE.replace("\r", "")  # a carriage return starts a log line over: its own test below


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    from bench.cli import main

    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def observe(capsys, command: str, results: Path, *argv: str) -> tuple[int, str, str]:
    """``bench status dev`` / ``bench logs dev ...`` on the dev stack with ``results`` as the results root."""
    return cli(capsys, command, "dev", *argv, "--project-dir", str(ROOT), "--results-root", str(results))


def raw(text: str) -> list[str]:
    """The characters of ``text`` that a terminal does not draw as a glyph: Unicode's controls, formats (bidi,
    zero-width), surrogates and line/paragraph separators, but newline and tab."""
    import unicodedata

    hidden = ("Cc", "Cf", "Cs", "Zl", "Zp")
    return sorted({f"U+{ord(c):04X}" for c in text if c not in "\n\t" and unicodedata.category(c) in hidden})


def log(results: Path, run: str, text: bytes | str, exp: str = EXPERIMENT) -> Path:
    path = results / "dev" / run / exp / "logs" / "node-0.log"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8", "surrogateescape"))
    return path


# -- times out of range -----------------------------------------------------------------------------------

def test_a_time_no_datetime_can_hold_is_no_time():
    from bench.results.timeline import EARLIEST, LATEST, parse_iso, steps_from_summary, utc_text

    assert parse_iso(EARLY) is None and parse_iso(LATE) is None and parse_iso("0001-01-01T00:00:00") is None
    assert parse_iso("2026-11-27T09:12:39Z") == 1795770759.0 and parse_iso("x" * 10_000) is None
    assert utc_text(EARLIEST) == "1970-01-01 00:00:00" and utc_text(LATEST) == "9999-12-31 23:59:59"
    assert steps_from_summary({"started_at": EARLY, "ended_at": LATE}) is None


def test_status_shows_a_start_out_of_range_as_invalid_time(tmp_path, capsys):
    """Before: ``ValueError: year 0 is out of range`` from the table, exit 1."""
    for run, start in (("r1", EARLY), ("r2", LATE), ("r3", "2026-01-01T00:00:00Z")):
        write_experiment(tmp_path, f"dev/{run}/{EXPERIMENT}", summary(EXPERIMENT, started_at=start), ranks=0)
    code, out, err = observe(capsys, "status", tmp_path)
    assert code == 0 and "Traceback" not in err
    rows = {r.split()[0]: " ".join(r.split()) for r in out.split("\n\n", 1)[1].splitlines()[2:]}
    assert "succeeded invalid time 1h 00m" in rows["r1"] and "succeeded invalid time 1h 00m" in rows["r2"]
    assert "succeeded 2026-01-01 00:00:00 1h 00m" in rows["r3"]
    code, out, _ = observe(capsys, "status", tmp_path, "--json")
    assert code == 0 and [r["started_at"] for r in json.loads(out)["runs"]] == ["2026-01-01T00:00:00Z", None, None]


def test_results_load_and_the_report_read_a_start_out_of_range_as_unknown_with_a_warning(tmp_path):
    """Before: ``started_at`` of year 0 and year 10000 in the frame and on the page."""
    from bench.report import page as report
    from bench.results import frames

    write_experiment(tmp_path, "dev/r1/a", summary("a", started_at=EARLY))
    write_experiment(tmp_path, "dev/r1/b", summary("b", started_at=LATE))
    with pytest.warns(UserWarning, match=r"started_at: 2 value\(s\) not a time"):
        df = frames.load(str(tmp_path / "dev"))
    assert df["started_at"].isna().all()
    text = report.write_report([str(tmp_path / "dev")], tmp_path / "r.html").read_text()
    assert "0000-12-31" not in text and "10000-01-01" not in text and "not a time" in text


# -- over-long log lines ----------------------------------------------------------------------------------

def lines_of(*chunks: bytes, **kw) -> list[str]:
    from bench.results.node_logs import offset_lines

    return [text for _, _, text in offset_lines(iter(chunks), **kw)]


def test_a_line_shows_its_last_carriage_return_segment_as_a_terminal_would():
    """A progress bar redraws itself with "\\r": its last state is the line; "\\r\\n" ends a line as "\\n" does."""
    assert lines_of(b" 10%|#\r 50%|###", b"##\r100%|#####\n", b"done\r\n\r\n", b"a\rb\r\r") == [
        "100%|#####", "done", "", "b"]


def test_a_line_past_16_kib_is_cut_once_with_the_bytes_it_dropped():
    """Before: a new 16,384-character piece of the line about every 128 KB of it."""
    from bench.results.safe_paths import MAX_LINE

    got = lines_of(b"start\n", b"a" * (1 << 20), b"b" * (1 << 20), b"\nend")
    assert got == ["start", "a" * MAX_LINE + f"… ({(2 << 20) - MAX_LINE:,} bytes cut)", "end"]
    eacute = "é".encode() * 20_000  # 40,000 bytes: the cut falls between a character's two bytes, never inside
    assert lines_of(b"x" + eacute + b"\n") == ["x" + "é" * 8191 + f"… ({40_001 - 16_383:,} bytes cut)"]


def test_the_kubelets_time_stays_in_front_of_a_lines_last_segment():
    from bench.cloud.kube import log_lines

    class Response:  # http.client.HTTPResponse's read1: what the server sent so far, at most n bytes
        def __init__(self, data: bytes):
            self.parts = [data[i:i + 7] for i in range(0, len(data), 7)]

        def read1(self, n: int) -> bytes:
            return self.parts.pop(0) if self.parts else b""

    body = b"2026-11-27T09:12:39.123456789Z  10%\r 99%\r100%\n2026-11-27T09:12:40Z plain\nnostamp\n"
    assert list(log_lines(Response(body), timestamps=True)) == [
        "2026-11-27T09:12:39.123456789Z 100%", "2026-11-27T09:12:40Z plain", "nostamp"]
    assert list(log_lines(Response(b"a\rb\n" + b"c" * 20_000 + b"\n"), timestamps=False))[0] == "b"


def test_logs_tail_5_of_a_log_with_a_64_mb_progress_line_prints_5_short_lines(tmp_path, capsys):
    """Before: 515 lines and 8.6 MB printed for ``--tail 5``."""
    bar = b"".join(b"\r %3d%%|" % (i % 100) + b"#" * 90 for i in range((64 << 20) // 96))
    log(tmp_path, "r1", b"one\ntwo\n" + bar + b"\nthree\nfour\nfive\n")
    code, out, err = observe(capsys, "logs", tmp_path, EXPERIMENT, "--tail", "5")
    assert code == 0 and not err
    last = ((64 << 20) // 96 - 1) % 100  # the bar's last state
    assert out.splitlines() == ["node-0: two", f"node-0:  {last:3d}%|" + "#" * 90, "node-0: three", "node-0: four",
                                "node-0: five"]


def test_a_64_mb_line_is_read_in_bounded_memory(tmp_path):
    from bench.local.observe import local_logs

    exp = log(tmp_path, "r1", b"head\n" + b"y" * (64 << 20) + b"\ntail\n").parent.parent
    tracemalloc.start()
    try:
        got = list(local_logs(exp, False, tail=3))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(got) == 3 and got[1].endswith(f"… ({(64 << 20) - 16384:,} bytes cut)")
    assert peak < 2 << 20, f"peak {peak / 2 ** 20:.1f} MiB"


# -- characters that reorder, hide or drive ---------------------------------------------------------------

def test_every_hidden_character_is_shown_as_its_escape_and_text_stays_as_it_is():
    from bench.terminal import safe, safe_line

    shown = safe(HOSTILE + ESC + "\udcff\U000e0041")
    assert not raw(shown) and "\\u202e" in shown and "\\u200b" in shown and "\\ufeff" in shown
    assert "\\x1b]52;c;aGVsbG8=\\x07\\x1b[2J" in shown and "\\x9b" in shown and "\\udcff\\U000e0041" in shown
    plain = "é 中文 █▌ \u00a0 ✓ 🙂 tab\there\nnext"
    assert safe(plain) == plain and safe_line(plain) == plain.replace("\n", "\\n")
    assert safe_line("a" * 300, 200) == "a" * 200 + "…"


@pytest.fixture
def hostile_tree(tmp_path):
    """A run whose status, folder names and log line hold every hidden character."""
    write_experiment(tmp_path, f"dev/r1/{EXPERIMENT}", summary(EXPERIMENT, status=f"succ\u202eeded\u202c{ESC}"),
                     ranks=1)
    write_experiment(tmp_path, "dev/r1/z\u200bw", summary("z\u200bw", status=HOSTILE), ranks=1)
    write_experiment(tmp_path, f"dev/r1/bad{IN_A_NAME}", "[1", ranks=1)  # unreadable: a warning naming it
    log(tmp_path, "r1", f"hello \u202e{IN_A_LINE}{ESC} world\n")
    return tmp_path


def test_status_escapes_them(hostile_tree, capsys):
    code, out, err = observe(capsys, "status", hostile_tree)
    assert code == 0 and not raw(out) and not raw(err), (raw(out), raw(err))
    assert "succ\\u202eeded\\u202c\\x1b]52;" in out and "z\\u200bw" in out and "bad\\u202a\\u202b" in out


def test_logs_escape_them(hostile_tree, capsys):
    code, out, err = observe(capsys, "logs", hostile_tree, EXPERIMENT)
    assert code == 0 and not raw(out) and not raw(err)
    assert out.startswith("node-0: hello \\u202e\\u202a") and out.endswith("\\x1b[2J world\n")


def test_the_report_escapes_them_as_visible_code_points(hostile_tree, capsys):
    from bench.report import page as report

    text = report.write_report([str(hostile_tree / "dev")], hostile_tree / "r.html").read_text()
    assert not raw(text), raw(text)
    assert "succ\\u202eeded\\u202c" in text and "z\\u200bw" in text
    warnings = re.search(r"<h2>Loader warnings</h2>(.*?)</ul>", text).group(1)
    assert "bad\\u202a\\u202b\\u202c\\u202d\\u202e" in warnings
    assert not raw(capsys.readouterr().out)


def test_compare_escapes_them_as_the_rest_of_the_cli_does(hostile_tree, capsys):
    """Before: compare showed each as "?", and the other commands showed U+202E and U+200B raw."""
    code, out, err = cli(capsys, "compare", str(hostile_tree / "dev" / "r1"), str(hostile_tree / "dev" / "r1"))
    assert code in (0, 2) and not raw(out) and not raw(err)
    assert "z\\u200bw" in out


def test_an_error_quoting_them_escapes_them(capsys):
    from bench.errors import fail

    assert fail(f"no such thing {HOSTILE}") == 2
    assert not raw(capsys.readouterr().err)


def test_plan_refuses_an_experiment_name_holding_them_in_one_escaped_line(tmp_path, capsys):
    import shutil

    import yaml

    shutil.copy(ROOT / "Pulumi.yaml", tmp_path / "Pulumi.yaml")
    config = {"aws:region": "us-east-1", "eksbench:cluster": {"public_access_cidrs": []},
              "eksbench:gpu_node_groups": [{"name": "g5", "instance_type": "g5.2xlarge", "max_size": 2}],
              "eksbench:experiments": [{"name": f"a\u202eb{ESC}", "workload": "resnet50", "dataset": "synthetic"}]}
    (tmp_path / "Pulumi.x.yaml").write_text(yaml.safe_dump({"config": config}, allow_unicode=True))
    code, out, err = cli(capsys, "plan", "x", "--project-dir", str(tmp_path))
    assert code == 2 and not raw(out + err) and "experiments[0].name" in err


# -- names too long ---------------------------------------------------------------------------------------

def test_a_run_id_has_a_length_limit_with_the_other_rules():
    from core.contract.results_location import MAX_RUN_ID, check_run_id, segment_problem

    assert check_run_id("r" * MAX_RUN_ID) == "r" * MAX_RUN_ID
    with pytest.raises(ValueError, match=r"^run id 'x{79}\.\.\. \(222 more characters\) is 300 characters long, "
                                         r"past the limit of 64: use 1-64 letters"):
        check_run_id(LONG_ID)
    for bad in ("a b", "../x", "", ".x", None):
        with pytest.raises(ValueError, match="use 1-64 letters, digits"):
            check_run_id(bad)
    assert segment_problem("é" * 128) == "is 256 bytes long, past a folder name's 255" and not segment_problem("x" * 255)


def one_line(err: str) -> str:
    assert err.count("\n") == 1 and "Traceback" not in err and len(err) < 400, err
    return err


def test_logs_refuses_a_300_character_run_id_in_one_line(tmp_path, capsys):
    """Before: ``OSError: [Errno 36] File name too long`` and its traceback."""
    code, _, err = observe(capsys, "logs", tmp_path, EXPERIMENT, "--run-id", LONG_ID)
    assert code == 2 and "past the limit of 64" in one_line(err)
    code, _, err = observe(capsys, "logs", tmp_path, "e" * 300)
    assert code == 2 and "(222 more characters) in stack dev" in one_line(err)
    log(tmp_path, "r1", "x\n")
    code, _, err = observe(capsys, "logs", tmp_path, EXPERIMENT, "--node", "n" * 300)
    assert code == 2 and "more characters) in the logs of" in one_line(err)


def test_automation_logs_refuses_a_300_character_run_id(tmp_path):
    from bench import automation

    with pytest.raises(ValueError, match="past the limit of 64"):
        automation.logs("dev", EXPERIMENT, root=ROOT, results_root=tmp_path, run_id=LONG_ID)


def test_run_refuses_a_run_id_past_the_limit_naming_it(capsys, tmp_path):
    code, _, err = cli(capsys, "run", "dev", "--local", "--dry-run", "--run-id", "r" * 65, "--results-root",
                       str(tmp_path))
    assert code == 2 and "is 65 characters long, past the limit of 64" in one_line(err)


def test_compare_report_and_load_say_no_results_at_a_path_too_long_to_look_up(tmp_path, capsys):
    """Before: compare failed with exit 3 on the OSError, report and ``results.load`` raised it."""
    from bench.results import frames

    too_long = str(tmp_path / LONG_ID)
    code, _, err = cli(capsys, "compare", too_long, str(tmp_path))
    assert code == 2 and "no results at" in one_line(err)
    code, _, err = cli(capsys, "report", too_long, "--out", str(tmp_path / "r.html"))
    assert code == 2 and "no results at" in one_line(err)
    with pytest.raises(frames.NoResults, match="no such folder"):
        frames.load(too_long)


def test_folders_named_to_the_file_systems_limit_are_read_everywhere(tmp_path, capsys):
    run, exp = "r" * 255, "e" * 255
    write_experiment(tmp_path, f"dev/{run}/{exp}", summary(exp))
    write_experiment(tmp_path, f"dev/{run}/{EXPERIMENT}", summary(EXPERIMENT))
    code, out, err = observe(capsys, "status", tmp_path)
    assert code == 0 and exp in out and "Traceback" not in err
    code, out, err = cli(capsys, "compare", str(tmp_path / "dev" / run), str(tmp_path / "dev" / run))
    assert code == 0 and "e" * 200 + "…" in out  # compare cuts a name at 200 characters
    from bench.results import frames

    assert sorted(frames.load(str(tmp_path / "dev"))["experiment"]) == [exp, EXPERIMENT]
