"""Storage: EFS or FSx for Lustre shared volumes, the Kubernetes volume over them, the results bucket and
the image repository."""
