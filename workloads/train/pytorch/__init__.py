"""The PyTorch trainer (``python -m workloads.train.pytorch``: the loop, its set-up, collectives and records), its
checkpoints, models, workloads and the evaluation job (``python -m workloads.train.pytorch.evaluate``)."""
