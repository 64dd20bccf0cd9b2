"""Tests of the datasets package: catalog, layouts, prepare/verify against moto S3, staging."""
