"""``python -m workloads.train.horovod``: one Horovod rank of a PyTorch training job (``trainer.py``)."""

import runpy

runpy.run_module("workloads.train.horovod.trainer", run_name="__main__", alter_sys=True)
