"""The names two processes agree on: files a run leaves, env vars a pod reads, labels the cluster carries.

One home each: the launcher, the trainers, the Job manifests, ``bench`` and its readers import
them from here, so a rename is one edit and a reader never looks for a file under an old name.
"""

from __future__ import annotations

# Files a run leaves under its results folder (workloads/train/harness/launch.py writes them).
ALLREDUCE_LINES_FILE = "allreduce.jsonl"  # under metrics/: the allreduce workload's busbw lines
