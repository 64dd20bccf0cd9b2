"""``python -m workloads.train.tensorflow``: one TensorFlow worker (``trainer.py``), with the PyTorch trainer's CLI."""

import runpy

runpy.run_module("workloads.train.tensorflow.trainer", run_name="__main__", alter_sys=True)
