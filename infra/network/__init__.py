"""The VPC: subnets carved per availability zone (``subnets``, pure) and the component (``vpc``)."""
