"""Acting on AWS: the cloud backend, preflight, the Pulumi CLI and stack operations, Kubernetes, results
on S3, the run's timeline record and the audit of what a stack left behind."""
