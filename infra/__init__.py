"""The AWS and Kubernetes resources, as thin Pulumi components over pure builders, by concern (as pulumi-eks
arranges its own): ``network/``, ``cluster/``, ``storage/``, ``access/`` (identity and access) and
``addons/``. The four modules here are shared by all of them: resource options, registering a manifest,
labels, and the names the environment offers its workloads."""
