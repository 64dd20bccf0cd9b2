"""Horovod: ``bootstrap`` starts one rank per GPU on a pod; each rank (``python -m workloads.train.horovod``)
is the PyTorch trainer with Horovod's collectives."""
