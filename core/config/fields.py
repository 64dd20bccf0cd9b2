"""A small reader for nested config mappings that collects problems instead of raising.

Each problem names the full key path, quotes the value, states the rule and gives an
example, e.g. ``gpu_node_groups[0].max_size=-1: must be >= min_size (2), e.g. 4``.
Unknown keys are reported too, with the allowed ones listed, so a typo never silently
falls back to a default.
"""

from __future__ import annotations

import difflib
import ipaddress
import json
import re
from typing import Any, Callable, Iterable, Mapping

from core.contract.s3_uri import is_s3_uri

_MISSING = object()


class ConfigError(ValueError):
    """Every problem found in one stack's config, printed one per line."""

    def __init__(self, problems: list[str]):
        self.problems = list(problems)
        super().__init__("\n".join(self.problems))


def problem(key: str, value: Any, rule: str, example: str = "") -> str:
    """One problem line: ``key=<value>: rule, e.g. example``."""
    tail = f", e.g. {example}" if example else ""
    return f"{key}={show(value)}: {rule}{tail}"


MAX_SHOWN = 200  # characters of a value quoted in a message


def shorten(text: str, limit: int = MAX_SHOWN) -> str:
    """``text``, cut to about ``limit`` characters with the number left out said."""
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text) - limit} more characters)"


def show(value: Any) -> str:
    """A value as JSON for a message, cut to about MAX_SHOWN characters (a 5 MB value is not echoed)."""
    if isinstance(value, str):
        text = json.dumps(value)
    else:
        try:
            text = json.dumps(value, sort_keys=True)
        except (TypeError, ValueError):
            text = repr(value)
    return shorten(text)


class Reader:
    """Reads typed fields from one mapping; remembers which keys it read."""

    def __init__(self, data: Any, path: str, problems: list[str]):
        self.path = path
        self.problems = problems
        self.used: set[str] = set()
        self.refused: set[str] = set()  # keys already reported as something else than unknown (not allowed either)
        if data is None:
            data = {}
        if not isinstance(data, Mapping):
            self.fail(path, data, "must be a mapping of keys to values", "{...}")
            data = {}
        self.data = data

    def key(self, name: str) -> str:
        """The full path of ``name`` here: ``a.b``, or ``a["odd key"]`` for a key that is not a plain name."""
        if not re.fullmatch(r"[A-Za-z_][\w-]*", name):
            return f"{self.path}[{json.dumps(shorten(name, 60))}]"
        return f"{self.path}.{name}" if self.path else name

    def fail(self, key: str, value: Any, rule: str, example: str = "") -> None:
        self.problems.append(problem(key, value, rule, example))

    def missing(self, name: str, example: str) -> None:
        self.problems.append(f"{self.key(name)}: is required, e.g. {example}")

    def raw(self, name: str, default: Any = _MISSING) -> Any:
        self.used.add(name)
        return self.data.get(name, default)

    def string(self, name: str, default: Any = _MISSING, *, choices: Iterable[str] = (),
               pattern: str = "", example: str = "") -> Any:
        v = self.raw(name)
        if v is _MISSING:
            if default is _MISSING:
                self.missing(name, example or show(next(iter(choices), "...")))
                return None
            return default
        choices = tuple(choices)
        if not isinstance(v, str):
            self.fail(self.key(name), v, "must be a string" + (f", one of {', '.join(choices)}" if choices else ""),
                      example or show(choices[0] if choices else "..."))
            return default if default is not _MISSING else None
        if choices and v not in choices:
            self.fail(self.key(name), v, f"must be one of {', '.join(choices)}", show(choices[0]))
            return default if default is not _MISSING else None
        if pattern and not re.fullmatch(pattern, v):
            self.fail(self.key(name), v, f"must match {pattern}", example)
            return default if default is not _MISSING else None
        return v

    def integer(self, name: str, default: Any = _MISSING, *, minimum: int | None = None,
                maximum: int | None = None, example: str = "") -> Any:
        v = self.raw(name)
        if v is _MISSING:
            if default is _MISSING:
                self.missing(name, example or "1")
                return None
            return default
        # Pulumi passes top-level scalars as strings; accept "3" as 3, never "3.5".
        if isinstance(v, str) and re.fullmatch(r"-?\d+", v.strip()):
            v = int(v)
        if isinstance(v, bool) or not isinstance(v, int):
            self.fail(self.key(name), v, "must be a whole number", example or str(default if default is not _MISSING else 1))
            return default if default is not _MISSING else None
        if minimum is not None and v < minimum:
            self.fail(self.key(name), v, f"must be >= {minimum}", example or str(max(minimum, 1)))
            return default if default is not _MISSING else None
        if maximum is not None and v > maximum:
            self.fail(self.key(name), v, f"must be <= {maximum}", example or str(maximum))
            return default if default is not _MISSING else None
        return v

    def boolean(self, name: str, default: Any = _MISSING) -> Any:
        v = self.raw(name)
        if v is _MISSING:
            if default is _MISSING:
                self.missing(name, "true")
                return None
            return default
        if isinstance(v, str) and v.lower() in ("true", "false"):
            return v.lower() == "true"
        if not isinstance(v, bool):
            self.fail(self.key(name), v, "must be true or false", "true")
            return default if default is not _MISSING else None
        return v

    def strings(self, name: str, default: tuple = (), *, check: Callable[[str], str] | None = None,
                example: str = '["a"]') -> tuple:
        v = self.raw(name)
        if v is _MISSING:
            return default
        if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
            self.fail(self.key(name), v, "must be a list of strings", example)
            return default
        if check:
            for i, x in enumerate(v):
                rule = check(x)
                if rule:
                    self.fail(f"{self.key(name)}[{i}]", x, rule, example)
        return tuple(v)

    def mapping(self, name: str) -> Any:
        v = self.raw(name)
        return None if v is _MISSING else v

    def string_map(self, name: str) -> dict[str, str]:
        v = self.raw(name)
        if v is _MISSING:
            return {}
        if not isinstance(v, Mapping) or not all(isinstance(k, str) and isinstance(x, str) for k, x in v.items()):
            self.fail(self.key(name), v, "must be a mapping of strings to strings", '{"team": "ml"}')
            return {}
        return dict(v)

    def s3_uri(self, name: str, default: Any = None) -> Any:
        v = self.string(name, default, example='"s3://my-bucket/datasets/"')
        if isinstance(v, str) and v is not default and not is_s3_uri(v):
            self.fail(self.key(name), v, "must be an S3 URI s3://<bucket>/<prefix>/ with a valid bucket name",
                      '"s3://my-bucket/datasets/"')
            return default
        return v

    def finish(self) -> None:
        """Report keys nobody read: typos and keys from another version of the schema."""
        unknown = sorted(set(self.data) - self.used - self.refused, key=str)
        known = sorted(str(k) for k in self.used)
        allowed = ", ".join(known)
        for k in unknown:
            near = difflib.get_close_matches(str(k), known, n=1)
            hint = f"did you mean {near[0]!r}? " if near else ""
            self.fail(self.key(str(k)), self.data[k], f"unknown key; {hint}allowed keys here: {allowed}")


def read_items(raw: Any, key: str, parse: Callable[[Reader], Any] | None, problems: list[str], *, non_empty: bool,
               what: str, example: str) -> tuple:
    """Each item of the list at ``key`` through ``parse(Reader)``; the items whose shape is clean. ``parse`` may be
    None where ``raw`` is known not to be a list: only its problem is wanted."""
    if not isinstance(raw, list) or (non_empty and not raw):
        problems.append(f"{key}={show(raw)}: must be a {'non-empty ' if non_empty else ''}list of {what}, "
                        f"e.g. {example}")
        return ()
    out = []
    for i, item in enumerate(raw):
        r = Reader(item, f"{key}[{i}]", problems)
        parsed = parse(r)
        r.finish()
        if parsed is not None:
            out.append(parsed)
    return tuple(out)


def cidr_rule(value: str) -> str:
    try:
        ipaddress.ip_network(value, strict=True)
    except ValueError:
        return "must be an IPv4 CIDR block such as 203.0.113.0/24 (host bits zero)"
    return ""


# Address blocks reserved for documentation (RFC 5737): they route nowhere, so an API endpoint open
# only to them is open to nobody, and the operator's own kubectl and `pulumi up` time out.
DOCUMENTATION_NETWORKS = tuple(ipaddress.ip_network(n) for n in ("192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24"))


def documentation_cidr(value: str) -> bool:
    """True when ``value`` (a valid CIDR) lies inside a documentation range."""
    try:
        net = ipaddress.ip_network(value, strict=False)
    except ValueError:
        return False
    return any(net.version == d.version and net.subnet_of(d) for d in DOCUMENTATION_NETWORKS)


# Words that mark a bucket name copied from an example rather than one the user owns.
PLACEHOLDER_BUCKET_WORDS = ("my-", "example", "placeholder", "changeme", "change-me", "your-", "replace", "todo")


def placeholder_bucket(bucket: str) -> bool:
    return any(w in bucket for w in PLACEHOLDER_BUCKET_WORDS)
