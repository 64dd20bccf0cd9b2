"""Reading what runs left: files and their readers, frames, statistics, cost, the timeline, comparisons.

``from bench import results`` is the notebook's entry: ``results.load``, ``results.steps`` and
``results.repeats`` give pandas DataFrames (``bench.results.frames``); a source that does not exist
raises ``results.NoResults`` (a ``FileNotFoundError``).
"""

from bench.results.frames import COLUMNS, STEP_COLUMNS, NoResults, load, repeats, runs, steps  # noqa: F401 - the public API
