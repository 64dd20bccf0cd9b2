"""One reader per file kind a run leaves: the shape is checked once, the rest of bench trusts it.

Everything under a results prefix was written by pods running an image the user may not have
built, through a role that can write anywhere under the stack's prefix, so every file is
untrusted input. Each reader takes the file's text (already cut to ``MAX_*`` by the caller)
and its name, keeps every field of the expected type, drops the others, and gives ONE
``warnings.warn`` per file naming the file and the fields it dropped; it never raises.

    summary.json         read_summary    (bench.results.frames, bench status, the watch in bench run)
    progress.json        read_progress   (bench status, the watch in bench run)
    eval/eval.json       read_eval       (bench.results.frames, bench run's table)
    metrics/rank-N.jsonl read_rank_lines (its rules; bench.results.rank_lines streams the files through LineCheck)
    metrics/eval.jsonl   read_eval_lines
    metrics/events.jsonl read_event_lines
    telemetry/<node>.jsonl  bench.results.hardware (its TELEMETRY_LINE rules, streamed like the rank files)
    timeline.json        read_timeline   (bench report; the run's own record, beside the experiments)
    autostop.json        read_autostop   (bench status; the cluster's controller, beside the experiments)

A field may always be null (the writers leave out what they did not measure). Numbers must be
finite and in range (``MAX_NUMBER``; an integer of 400 digits made ``math.isfinite`` raise, and 1.7e308
overflowed every sum to infinity); throughputs and step times must be positive; a document nests at most
``MAX_DEPTH`` levels (checked without recursion); lists a report draws (timeline phases) are cut at
``MAX_ITEMS`` with a note.
Fields a reader does not know are kept as they are: nothing in bench reads them.
"""

from __future__ import annotations

import json
import math
import warnings
from typing import Any, Callable, Mapping

from core.contract import summary_fields as F
from core.contract.names import EVAL_FILE, PROGRESS_FILE, SUMMARY_FILE, TIMELINE_FILE

# Bounds: a hostile or runaway run makes the report slower, never the machine fall over.
MAX_JSON_BYTES = 4 * 1024 * 1024  # summary.json, progress.json, eval.json: a real one is a few KiB
MAX_LINES_BYTES = 64 * 1024 * 1024  # one metrics/*.jsonl file: a real 10,000-step rank file is ~2 MiB
MAX_LINES = 200_000  # metrics lines kept per file, the first ones (a run's steps in order)
MAX_LINE_BYTES = 1024 * 1024  # one metrics line: a real one is under 2 KiB (1,000 step times fit in 16 KiB)
# Metrics lines, and step times in them, read over all experiment runs of one ``results.runs`` or ``results.steps`` call
# (one ``bench report``), or of one experiment run in ``results.load``: counted as they are read
# (bench.results.rank_lines, where their memory is: about 90 bytes a line and 8 a step time).
MAX_STEP_ROWS = 5_000_000
MAX_STEP_TIMES = 50_000_000  # ten a line at MAX_STEP_ROWS; a run logging every 50 steps reaches it at 1,000,000 lines
MAX_LOG_TAIL_BYTES = 256 * 1024  # the end of a log is read for its root cause, never the whole log
MAX_TEXT = 4_000  # characters kept of any one string field (an error message, a command argument)
MAX_NUMBER = 1e15  # any number a run reports (FLOPs per sample, wall times, counts) lies well within this
MAX_DEPTH = 32  # nesting levels of one document or line: a real summary has 4
MAX_ITEMS = 200  # entries kept of a list a report draws one mark per entry for (a real timeline has about 10 phases)
MIN_SECONDS = 1e-9  # a step shorter than a nanosecond is no measurement (5e-324 made compare print Infinity)

Check = Callable[[Any], bool]


def number(v: Any) -> bool:
    """A finite number within +-MAX_NUMBER (an int is compared as it is: converting a huge one overflows)."""
    if type(v) is float or type(v) is int:  # JSON's own types, the common case (NaN and infinity fail the range)
        return -MAX_NUMBER <= v <= MAX_NUMBER
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return False
    return -MAX_NUMBER <= v <= MAX_NUMBER if isinstance(v, int) else math.isfinite(v) and abs(v) <= MAX_NUMBER


def integer(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and -MAX_NUMBER <= v <= MAX_NUMBER


def positive(v: Any) -> bool:
    """A rate: a number above zero (a negative throughput once compared as "faster")."""
    return number(v) and v > 0


def non_negative(v: Any) -> bool:
    """A measured amount that cannot be below zero (energy, power): a negative one is no measurement."""
    return number(v) and v >= 0


def seconds(v: Any) -> bool:
    """A duration that was measured: at least MIN_SECONDS."""
    return number(v) and v >= MIN_SECONDS


def text(v: Any) -> bool:
    return isinstance(v, str)


def flag(v: Any) -> bool:
    return isinstance(v, bool)


def scalar(v: Any) -> bool:
    return v is None or text(v) or flag(v) or number(v)


def list_of(check: Check) -> Check:
    return lambda v: isinstance(v, list) and all(check(x) for x in v)


def map_of(check: Check) -> Check:
    return lambda v: isinstance(v, dict) and all(isinstance(k, str) and check(x) for k, x in v.items())


def flat_object(v: Any) -> bool:
    """An object of scalars (device facts): each value shows as a table cell."""
    return isinstance(v, dict) and all(isinstance(k, str) and scalar(x) for k, x in v.items())


# A nested dict is a sub-schema: checked field by field, its bad fields dropped and named "outer.inner".
Schema = Mapping[str, Any]

THROUGHPUT: Schema = {F.SAMPLES_PER_S_TOTAL: positive, F.SAMPLES_PER_S_PER_PROCESS: positive,
                      F.SAMPLES_PER_S_PER_DEVICE: positive, F.DEVICES_PER_PROCESS: integer,
                      F.STEP_TIME_P50_S: seconds, F.STEP_TIME_P95_S: seconds}
ACCURACY: Schema = {F.BEST_ACCURACY: number, F.TIME_TO_ACCURACY_S: number, "target_accuracy": number,
                    "time_to_accuracy_epoch": integer}
CONFIG: Schema = {"workload": text, "batch_size": integer, "precision": text, "epochs": integer, "steps": integer}
STARTUP: Schema = {"time_to_first_step_s": number, "phases_s": map_of(number)}
LAUNCH: Schema = {F.LAUNCH_NODES: integer, F.LAUNCH_PROCS_PER_NODE: integer}
TELEMETRY: Schema = {F.TELEMETRY_SOURCE: text, F.TELEMETRY_REASON: text, "nodes": integer, "gpus": integer,
                     "samples": integer, "seconds": number, F.UTIL_MEAN_PCT: number, F.UTIL_P95_PCT: number,
                     F.MEMORY_PEAK_BYTES: integer, F.MEMORY_TOTAL_BYTES: integer, F.POWER_MEAN_W: non_negative,
                     F.ENERGY_J: non_negative, F.ENERGY_TO_ACCURACY_J: non_negative, F.THROTTLE_S: number,
                     F.IDLE_SHARE: number, F.ENERGY_SOURCE: lambda v: v in F.ENERGY_SOURCES}


def val_loss(v: Any) -> bool:  # a validation: step, tokens trained by then, loss, seconds since the start, or null
    return isinstance(v, dict) and all(v.get(k) is None or number(v[k]) for k in ("step", "tokens", "val_loss",
                                                                                   "elapsed_s"))


# A language model's block (language_model_summary; bench.results.language_model); no run has 0 parameters
count = lambda v: integer(v) and v >= 1  # noqa: E731 - parameters, tokens, ranks: at least one
LANGUAGE_MODEL: Schema = {
    F.TOKENS_PER_S: positive, F.TOKENS_PER_S_PER_DEVICE: positive, F.FLOPS_PER_TOKEN: positive,
    "tflops_per_s_per_gpu": positive, F.MFU: non_negative, "mfu_convention": text, "mfu_fp8_peak": positive,
    "data_wait_share": non_negative, "first_loss": number, "final_loss": number, "val_losses": list_of(val_loss),
    F.FINAL_VAL_LOSS: number, "target_loss": number, F.TOKENS_TO_TARGET: non_negative,
    F.TIME_TO_TARGET_LOSS_S: non_negative, "model_size": text, "parameters": count, "seq_len": count,
    "tensor_parallel": count, "data_parallel": count, "sharding": text,
    "activation_checkpoint": lambda v: text(v) or flag(v), "fp8_recipe": text, "tokens_per_sequence": count,
}
SUMMARY: Schema = {
    F.EXPERIMENT: text, F.STATUS: text, F.EXIT_CODE: integer, F.ERROR: text, F.STARTED_AT: text, "ended_at": text,
    F.WALL_TIME_S: number, F.IMAGE: text, F.GIT_COMMIT: text, F.RESULTS_URI: text, F.COMMAND: list_of(text),
    F.CONFIG: CONFIG, F.LAUNCH: LAUNCH, F.INSTANCE_TYPE: text, F.FRAMEWORK: text, F.NODES: integer,
    F.GPUS_PER_NODE: integer, F.DEVICE: flat_object, F.WORLD_SIZES: list_of(integer), F.RESTARTS: integer,
    F.THROUGHPUT: THROUGHPUT, F.ACCURACY: ACCURACY, F.MFU: number, F.TFLOPS_PER_S: number,
    F.FLOPS_PER_SAMPLE: number, F.LOOP_SECONDS: number, F.DATA_WAIT_S: number, "coverage": {"steps": integer},
    F.WHAT_RAN: flat_object, F.WHAT_RAN_UNKNOWN: map_of(text), F.STARTUP: STARTUP,
    F.SAMPLES_PER_EPOCH: integer, F.TELEMETRY: TELEMETRY, F.LANGUAGE_MODEL: LANGUAGE_MODEL,
}
PROGRESS: Schema = {"step": integer, "total": integer, "samples_per_s": number, "world_size": integer,
                    "updated_at": text}
EVAL: Schema = {"workload": text, "checkpoint": text, "step": integer, "epoch": integer, "accuracy": number,
                "samples": integer, "seconds": number}
RANK_LINE: Schema = {"step": integer, "loss": number, "step_time_s": seconds, "samples_per_s": positive,
                     "samples": integer, "warmup": flag, "restart": integer, "world_size": integer,
                     "wall_time": number, "steps": integer, "step_times_s": list_of(seconds)}
EVAL_LINE: Schema = {"epoch": integer, "step": integer, "accuracy": number, "elapsed_s": number}
EVENT_LINE: Schema = {"event": text, "step": integer, "wall_time": number}


def _span(v: Any) -> bool:
    return (isinstance(v, dict) and text(v.get("name")) and number(v.get("start_s")) and number(v.get("end_s"))
            and v["end_s"] >= v["start_s"])


def _stepping(v: Any) -> bool:
    return isinstance(v, dict) and text(v.get("name")) and all(
        v.get(k) is None or number(v[k]) for k in ("pods_started_s", "first_step_s", "last_step_s"))


# timeline.json (bench/results/timeline.py; written by bench run, but it lies in the bucket beside what pods wrote).
# Its "figures" are not read: the report derives them again from the marks.
TIMELINE: Schema = {"stack": text, "run_id": text, "started_at": text, "gpu_nodes": integer,
                    "gpu_hourly_usd": number, "prices": text, "phases": list_of(_span),
                    "experiments": list_of(_stepping),
                    "audit": {"clean": flag, "lines": list_of(text)}}


def cut_text(value: str, limit: int = MAX_TEXT) -> str:
    return value if len(value) <= limit else f"{value[:limit]}… ({len(value) - limit} more characters cut)"


def _cut_strings(v: Any) -> Any:
    if isinstance(v, (int, float)):  # most values (a metrics line's step times): nothing to cut, no call each
        return v
    if isinstance(v, str):
        return cut_text(v)
    if isinstance(v, list):
        return [x if isinstance(x, (int, float)) else _cut_strings(x) for x in v]
    if isinstance(v, dict):
        return {str(k)[:MAX_TEXT]: _cut_strings(x) for k, x in v.items()}
    return v


def checked(doc: Mapping[str, Any], schema: Schema, where: str = "") -> tuple[dict[str, Any], list[str]]:
    """(``doc`` with every field that breaks ``schema`` dropped, the dropped fields' dotted names)."""
    out: dict[str, Any] = {}
    bad: list[str] = []
    for key, value in doc.items():
        rule = schema.get(key)
        if value is None or rule is None:
            out[key] = _cut_strings(value)
        elif callable(rule):  # a check (else a sub-schema: a dict, never callable)
            if rule(value):
                out[key] = _cut_strings(value)
            else:
                bad.append(f"{where}{key}")
        elif isinstance(value, dict):
            out[key], inner = checked(value, rule, f"{where}{key}.")
            bad += inner
        else:
            bad.append(f"{where}{key}")
    return out, bad


def _fields(bad: list[str], shown: int = 8) -> str:
    names = list(dict.fromkeys(bad))
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more


def depth(doc: Any, limit: int = MAX_DEPTH) -> int:
    """How deep ``doc`` nests (a scalar: 0), counted without recursion and only up to ``limit`` + 1."""
    deepest, todo = 0, [(doc, 1)]
    while todo:
        v, d = todo.pop()
        if isinstance(v, (dict, list)):
            deepest = max(deepest, d)
            if d > limit:
                return d
            inner = v.values() if isinstance(v, dict) else v
            todo.extend((x, d + 1) for x in inner if isinstance(x, (dict, list)))  # scalars add no depth
    return deepest


def _decode(raw: str | bytes, name: str) -> Any:
    """The parsed document, or a ValueError whose text names what is wrong."""
    if len(raw) > MAX_JSON_BYTES:
        raise ValueError(f"larger than {MAX_JSON_BYTES // 1024 // 1024} MiB")
    try:
        doc = json.loads(raw)
    except RecursionError:
        raise ValueError("nested too deeply") from None
    except ValueError as e:
        raise ValueError(f"not valid JSON ({cut_text(str(e), 200)})") from None
    return doc


def read_document(raw: str | bytes | None, name: str, schema: Schema, *, stacklevel: int = 2) -> dict[str, Any] | None:
    """A JSON object file checked against ``schema``; None when absent or not an object at all."""
    if raw is None:
        return None
    try:
        doc = _decode(raw, name)
    except ValueError as e:
        warnings.warn(f"{name}: {e}; ignored", stacklevel=stacklevel + 1)
        return None
    if not isinstance(doc, dict):
        warnings.warn(f"{name}: expected a JSON object, found {type(doc).__name__}; ignored",
                      stacklevel=stacklevel + 1)
        return None
    deep = [k for k, v in doc.items() if depth(v) >= MAX_DEPTH]  # dropped alone: the rest of the run still counts
    doc = {k: v for k, v in doc.items() if k not in deep}
    out, bad = checked(doc, schema)
    bad = [f"{k} (nested deeper than {MAX_DEPTH} levels)" for k in deep] + bad
    if bad:
        warnings.warn(f"{name}: ignored field(s) of the wrong type: {_fields(bad)}", stacklevel=stacklevel + 1)
    return out


def read_summary(raw: str | bytes | None, name: str) -> dict[str, Any] | None:
    return read_document(raw, name, SUMMARY, stacklevel=2)


def read_progress(raw: str | bytes | None, name: str) -> dict[str, Any] | None:
    return read_document(raw, name, PROGRESS, stacklevel=2)


def read_eval(raw: str | bytes | None, name: str) -> dict[str, Any] | None:
    return read_document(raw, name, EVAL, stacklevel=2)


class LineCheck:
    """The JSON object lines of one file, checked one at a time against ``schema``: ``read_lines`` feeds it a text's
    lines, ``bench.results.rank_lines`` the lines of a file it streams. It keeps counts, never the lines.

    ``add(line)`` gives the line's fields of the right type (nulls dropped: ``.get(k, default)`` reads them as
    absent), or None for a blank or malformed line; ``None`` as the line is one too long to parse (malformed).
    A malformed last line is normal (the writer was killed) and is not counted, unless it is the only line of a
    file that was not cut; ``warning`` says the rest in one line.
    """

    def __init__(self, schema: Schema) -> None:
        self.schema = schema
        self.lines = 0  # non-blank lines seen
        self.malformed = 0
        self._last_malformed = False  # judged when the next line comes, or at the end
        self.bad: dict[str, None] = {}  # the wrong fields' names, in order (a schema has few)
        self.bad_count = 0

    def add(self, line: str | None) -> dict[str, Any] | None:
        if line is not None and not line.strip():
            return None
        self.lines += 1
        self.malformed += self._last_malformed
        doc = None
        if line is not None:
            try:
                doc = json.loads(line)
            except (ValueError, RecursionError):
                doc = None
        if isinstance(doc, dict) and depth(doc) <= MAX_DEPTH:
            self._last_malformed = False
            kept, wrong = checked(doc, self.schema)
            self.bad_count += len(wrong)
            self.bad.update(dict.fromkeys(wrong))
            return {k: v for k, v in kept.items() if v is not None}
        self._last_malformed = True
        return None

    def warning(self, name: str, *, cut: bool, max_lines: int = MAX_LINES) -> str | None:
        """The one line for the file (None when all was well); ``cut``: the file was read only in part."""
        malformed = self.malformed + (self._last_malformed and self.lines == 1 and not cut)
        problems = []
        if malformed:
            problems.append(f"skipped {malformed} malformed line(s)")
        if self.bad:
            problems.append(f"ignored field(s) of the wrong type in {self.bad_count} place(s): "
                            f"{_fields(list(self.bad))}")
        if cut:
            problems.append(f"read only the first {self.lines:,} line(s) (at most {max_lines:,} lines, "
                            f"{MAX_LINES_BYTES // 1024 // 1024} MiB); the rest was cut")
        return f"{name}: " + "; ".join(problems) if problems else None


def read_lines(raw: str | bytes, name: str, schema: Schema, *, truncated: bool = False,
               max_lines: int = MAX_LINES, stacklevel: int = 2) -> list[dict[str, Any]]:
    """The JSON object lines of a file, each checked against ``schema``; one warning for all that was wrong
    (``LineCheck``). The last line of a file the caller cut at ``MAX_LINES_BYTES`` (``truncated``) is dropped
    quietly, and the cut is said."""
    text_ = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
    pieces = text_.split("\n", max_lines)  # at most max_lines lines and the uncut rest: never a million strings
    cut = truncated or (len(pieces) > max_lines and bool(pieces[-1].strip()))
    check = LineCheck(schema)
    out = [doc for doc in map(check.add, pieces[:max_lines]) if doc is not None]
    said = check.warning(name, cut=cut, max_lines=max_lines)
    if said:
        warnings.warn(said, stacklevel=stacklevel + 1)
    return out


def read_rank_lines(raw: str | bytes, name: str, *, truncated: bool = False) -> list[dict[str, Any]]:
    return read_lines(raw, name, RANK_LINE, truncated=truncated)


def read_eval_lines(raw: str | bytes, name: str, *, truncated: bool = False) -> list[dict[str, Any]]:
    return read_lines(raw, name, EVAL_LINE, truncated=truncated)


def read_event_lines(raw: str | bytes, name: str, *, truncated: bool = False) -> list[dict[str, Any]]:
    return read_lines(raw, name, EVENT_LINE, truncated=truncated)


def _scaled_group(v: Any) -> bool:
    return isinstance(v, dict) and text(v.get("name")) and (v.get("changed") is None or flag(v["changed"]))


# autostop.json (workloads/train/control/autostop.py ``act``): written by the controller in the cluster.
AUTOSTOP: Schema = {"decided_at": text, "action": text, "reason": text, "cluster": text, "run_id": text,
                    "node_groups": list_of(_scaled_group), "suspended_jobs": list_of(text)}


def read_autostop(raw: str | bytes | None, name: str) -> dict[str, Any] | None:
    return read_document(raw, name, AUTOSTOP, stacklevel=2)


def read_timeline(raw: str | bytes | None, name: str) -> dict[str, Any] | None:
    doc = read_document(raw, name, TIMELINE, stacklevel=2)
    for key in ("phases", "experiments"):  # one mark each in the report's chart: a bounded count
        items = (doc or {}).get(key)
        if isinstance(items, list) and len(items) > MAX_ITEMS:
            warnings.warn(f"{name}: {key}: kept the first {MAX_ITEMS:,} of {len(items):,}", stacklevel=2)
            doc[key] = items[:MAX_ITEMS]
    return doc


READERS: dict[str, Callable[[Any, str], dict[str, Any] | None]] = {
    SUMMARY_FILE: read_summary, PROGRESS_FILE: read_progress, EVAL_FILE: read_eval,
    TIMELINE_FILE: read_timeline, "autostop.json": read_autostop}


def reader_for(file_name: str) -> Callable[[Any, str], dict[str, Any] | None]:
    """The reader of a JSON object file by its base name; an unknown kind is read with no field rules."""
    return READERS.get(file_name.rsplit("/", 1)[-1], lambda raw, name: read_document(raw, name, {}, stacklevel=2))
