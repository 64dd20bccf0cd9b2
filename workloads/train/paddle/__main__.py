"""``python -m workloads.train.paddle``: one PaddlePaddle parameter-server process, pserver or trainer (``ps.py``)."""

import runpy

runpy.run_module("workloads.train.paddle.ps", run_name="__main__", alter_sys=True)
