"""The Pulumi program's composition: the layer above infra, workloads and datasets.

``program.stack.build_stack`` takes a stack's raw config, validates it once (shape, then
meaning) and registers every resource. ``__main__.py`` calls it with Pulumi's config;
``bench plan`` calls it under the mock engine (program.offline).
"""
