"""Reading what runs left: files and their readers, frames, statistics, cost, the timeline, comparisons.

``from bench import results`` is the notebook's entry: ``results.load``, ``results.steps`` and
``results.repeats`` (and ``results.telemetry``, the hardware's timeline) give pandas DataFrames
(``bench.results.frames``); a source that does not exist
raises ``results.NoResults`` (a ``FileNotFoundError``), and one that cannot be listed (no AWS credentials, access
denied) ``results.UnreadableResults`` (a ``PermissionError``), each with one line saying why.
"""

from bench.results.frames import COLUMNS, STEP_COLUMNS, NoResults, UnreadableResults, load, repeats, runs, steps, telemetry  # noqa: F401 - the public API
