"""Reading what runs left: files and their readers, frames, statistics, cost, the timeline, comparisons.

``from bench import results`` is the notebook's entry: ``results.load``, ``results.steps`` and
``results.repeats`` give pandas DataFrames (``bench.results.frames``).
"""

from bench.results.frames import COLUMNS, STEP_COLUMNS, load, repeats, runs, steps  # noqa: F401 - the public API
