"""The bottom layer: what a stack, an experiment and a training run *are*, as plain data.

Frozen dataclasses and pure functions, standard library only: the stack config and its
shape check (``config``, ``fields``), the AWS catalog (``aws_catalog``), the training
command line (``train_args``), S3 URIs (``s3_uri``) and pinned versions (``pins``). Every
other layer imports from here; nothing here imports the rest of eksbench. Being
dependency-free is what lets the programs that run in pods (``workloads/train``,
``datasets/stage.py``) ship these modules beside them.
"""
