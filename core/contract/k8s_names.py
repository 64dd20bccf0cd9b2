"""Kubernetes object names from their parts (experiment name, run id, repeat, a role's suffix).

One function, ``dns1035_label``, builds every name the program gives a Kubernetes object it creates per
experiment (``workloads.object_names`` calls it). What it returns is always a DNS-1035 label as Kubernetes
checks it (apimachinery ``IsDNS1035Label``: ``[a-z]([-a-z0-9]*[a-z0-9])?``, at most 63 characters), which
a Service name must be and which every other name (Job, ServiceAccount, Role, a pod's hostname) accepts.

The readable form is the parts joined with ``-``. When that is already a valid label within the limit it
is the name, unchanged, so the names of ordinary stacks stay what they were. Otherwise (too long, upper
case, other characters, a leading digit or hyphen, empty) the readable form is lower-cased, every other
character becomes ``-``, an ``x`` goes in front if it does not start with a letter, it is cut to leave
room, and ``-<hash>`` is appended: 8 hex digits of the sha256 of the parts as given (JSON, so
``("a-b", "c")`` and ``("a", "b-c")`` differ). So a changed name meets another name only by a collision
of the hash (about one in four billion a pair), never by cutting, prefixing or lower-casing. What no
function of one name can see is two unchanged names that join to the same text (``"a-r1"`` + ``"r1"``
and ``"a"`` + ``"r1"`` + ``"r1"``): ``program.validation`` refuses a stack whose names collide, with
every run's names at hand.

Pure: no I/O, no imports beyond the standard library.
"""

from __future__ import annotations

import hashlib
import json
import re

MAX_LABEL = 63  # RFC 1035 / Kubernetes IsDNS1035Label
HASH_CHARS = 8  # hex digits of the sha256 appended to a name that had to change
LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
# The shortest limit that leaves a letter, "-" and the hash.
MIN_LIMIT = HASH_CHARS + 2


def is_dns1035_label(name: str, limit: int = MAX_LABEL) -> bool:
    """True when ``name`` is a DNS-1035 label of at most ``limit`` characters."""
    return isinstance(name, str) and 0 < len(name) <= min(limit, MAX_LABEL) and LABEL.fullmatch(name) is not None


def name_hash(parts: tuple[str, ...]) -> str:
    """The short stable hash of the parts as given (their JSON, so the boundaries between parts count)."""
    return hashlib.sha256(json.dumps(list(parts)).encode()).hexdigest()[:HASH_CHARS]


def dns1035_label(*parts: str, limit: int = MAX_LABEL) -> str:
    """The parts joined with ``-`` when that is a valid DNS-1035 label of at most ``limit`` characters;
    otherwise a readable, valid form of it cut to fit, ending ``-<hash of the parts>`` (see the module's doc).
    ``limit`` (at most 63) is for callers whose name is the stem of longer ones (a Job's pods' hostnames)."""
    if not MIN_LIMIT <= limit <= MAX_LABEL:
        raise ValueError(f"limit={limit}: must be between {MIN_LIMIT} and {MAX_LABEL}")
    parts = tuple(str(p) for p in parts)
    readable = "-".join(parts)
    if is_dns1035_label(readable, limit):
        return readable
    text = re.sub(r"[^a-z0-9-]+", "-", readable.lower()).strip("-")
    if not text[:1].isalpha():
        text = f"x{text}"
    room = limit - HASH_CHARS - 1
    return f"{text[:room].rstrip('-')}-{name_hash(parts)}"
