"""The launcher that wraps every framework's command in a pod (``python -m workloads.train.harness.launch``):
logs, exit paths, the summary, upload, progress, what ran and the fabric check. Never imports a framework."""
