"""Names and formats two processes exchange: the training command line, the launch command, where
results live, S3 URIs, summary fields, and the file, env var and label names (``names``)."""
