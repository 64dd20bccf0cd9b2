"""The bottom layer: what a stack, an experiment and a training run *are*, as plain data.

Frozen dataclasses and pure functions, standard library only, in three rooms:

- ``core.catalog``: dated, sourced facts about the outside world (instance types and prices,
  images and what runs where, pinned versions, fabric and scaling anchors, workload facts,
  GPU peaks). Imports nothing else of eksbench.
- ``core.contract``: names and formats two processes exchange (the training command line,
  the launch command, where results live, S3 URIs, summary fields, file names, env var
  names, label keys). Imports ``core.catalog`` only.
- ``core.config``: what a stack file may say, and its shape check. Imports both rooms above.

Every other layer imports from here; nothing here imports the rest of eksbench. Being
dependency-free is what lets the programs that run in pods (``workloads/train``,
``datasets/stage.py``) ship these modules beside them.
"""
