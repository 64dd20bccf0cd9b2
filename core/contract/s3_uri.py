"""S3 URIs, parsed one way everywhere: ``s3://bucket/a/b`` -> ("bucket", "a/b/").

The prefix is "" or ends in "/", whatever the input's trailing slash, so ``prefix + key``
and IAM resource patterns (``<prefix>*``) never straddle a folder boundary. The bucket must
follow S3's naming rules (3-63 characters: lowercase letters, digits, dots, hyphens). The
config reader, the IAM policies, the launcher's upload, evaluation and the staging script
all use this module; it is standard library only, so pods can ship it.
"""

from __future__ import annotations

import re

S3_URI = re.compile(r"^s3://([a-z0-9][a-z0-9.\-]{1,61}[a-z0-9])(?:/(\S*))?$")
EXAMPLE = "s3://my-bucket/datasets/"


def parse_s3_uri(uri: str) -> tuple[str, str]:
    """(bucket, prefix); ValueError naming the URI when it is not one."""
    m = S3_URI.match(uri) if isinstance(uri, str) else None
    if not m:
        raise ValueError(f"{uri!r} is not an S3 URI; expected s3://<bucket>/<prefix>/ with a valid bucket name, "
                         f"e.g. {EXAMPLE}")
    prefix = (m.group(2) or "").strip("/")
    return m.group(1), f"{prefix}/" if prefix else ""


def is_s3_uri(uri: object) -> bool:
    return isinstance(uri, str) and S3_URI.match(uri) is not None
