"""The cluster's control programs: the gate Job (``python -m workloads.train.control.gate``) and the autostop
controller (``python -m workloads.train.control.autostop``). Standard library, and boto3 for autostop."""
