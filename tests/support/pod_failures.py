"""What a failed container's log says went wrong, for tests/support/pod_sandbox.py: the kind of
failure and the path, module, variable or name it names, found in the log's last lines."""

from __future__ import annotations

import re

# What a failed container's log says went wrong, found in its last lines: (kind, pattern with the path).
DIAGNOSES = [("permission denied", re.compile(r"(?:Permission denied|EACCES)[:\s]+'?([^'\s]*)")),
             ("write under the read-only root", re.compile(r"Read-only file system[:\s]+'?([^'\s]*)")),
             ("missing module", re.compile(r"No module named '?([\w.]+)")),
             ("missing env variable", re.compile(r"KeyError: '([A-Z_][A-Z0-9_]*)'|(\w+): parameter not set")),
             ("unresolved name", re.compile(r"(?:Name or service not known|nodename nor servname|"
                                            r"Temporary failure in name resolution|Could not resolve host)\W*(\S*)")),
             ("command not found", re.compile(r"(\S+): (?:not found|No such file or directory)"))]


def diagnose(log: str) -> str:
    """The first known failure in ``log``: ``kind: path or name``, else its last line."""
    for line in log.splitlines()[-60:]:
        for kind, pattern in DIAGNOSES:
            m = pattern.search(line)
            if m:
                return f"{kind}: {next((g for g in m.groups() if g), '?')} ({line.strip()[:200]})"
    tail = [line for line in log.splitlines() if line.strip()]
    return tail[-1][:300] if tail else "no output"
