"""The PyTorch trainer (``python -m workloads.train.pytorch``), its checkpoints, models, workloads and the
evaluation job (``python -m workloads.train.pytorch.evaluate``)."""
