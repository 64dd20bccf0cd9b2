"""Identity and access, pure builders and one component: IAM policy documents, Pod Identity roles, pod
security contexts, NetworkPolicies and the file-permission model the pods' volumes are checked against."""
