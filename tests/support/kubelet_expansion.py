"""What the kubelet makes of a container's env, command and args before the container starts.

A transcription of Kubernetes' own code, for tests that must see what a container really runs:
- ``expand``: kubernetes/kubernetes third_party/forked/golang/expansion/expand.go ``Expand`` with
  ``MappingFuncFor`` (read at commit fde22c3f9aacfd260225a9741de123a41157b7c0; its cases are
  tests/infra/test_container_text.py's ``UPSTREAM_CASES``, from expand_test.go). ``$(VAR)`` with VAR
  defined becomes its value; ``$(VAR)`` undefined stays as written; ``$$`` becomes ``$``; ``$(``
  without a closing ``)`` stays; any other ``$`` stays with the character after it; a ``$`` at the
  end stays. The name is whatever lies between ``$(`` and the first ``)``, spaces and ``$`` included,
  and the value put in is not expanded again. Go walks the string's bytes and decodes the rune after a
  ``$`` (``utf8.DecodeRuneInString``); strings reach the kubelet as valid UTF-8 (the API's JSON and
  protobuf carry nothing else), so walking Python's code points is the same walk. (Older kubelets
  wrote the byte after a ``$`` as a rune of its own, ``string(input[0])``, garbling a multi-byte
  character there; a doubled ``$`` never reaches that case.)
- ``container_env``: pkg/kubelet/kubelet_pods.go ``makeEnvironmentVariables``: each env entry in
  order; a non-empty ``value`` is expanded against the variables declared before it; ``valueFrom`` is
  resolved and never expanded. Service links are off in every eksbench pod (``enableServiceLinks:
  false``); the API server's own ``KUBERNETES_SERVICE_*`` variables, which the kubelet still adds, are
  not modelled. An Indexed Job's pods get ``JOB_COMPLETION_INDEX`` from the Job controller as one more
  env entry, after the template's own (pkg/controller/job/indexed_job_utils.go
  ``addCompletionIndexEnvVariable`` appends it).
- ``command_and_args``: pkg/kubelet/container/helpers.go ``ExpandContainerCommandAndArgs``: every
  command and args string expanded against the container's resolved env.
"""

from __future__ import annotations

from typing import Callable, Mapping


def mapping_for(*contexts: Mapping[str, str]) -> Callable[[str], str]:
    """``MappingFuncFor``: the first context that defines the name gives its value; else ``$(name)`` again."""
    def mapping(name: str) -> str:
        for context in contexts:
            if name in context:
                return context[name]
        return f"$({name})"
    return mapping


def _read_variable_name(rest: str) -> tuple[str, bool, int]:
    """``tryReadVariableName``: (what was read, whether it is a name, characters consumed after the ``$``)."""
    if rest[0] == "$":  # escaped operator
        return "$", False, 1
    if rest[0] == "(":
        close = rest.find(")", 1)
        return (rest[1:close], True, close + 1) if close > 0 else ("$(", False, 1)  # incomplete reference
    return "$" + rest[0], False, 1


def expand(text: str, mapping: Callable[[str], str]) -> str:
    """``Expand``: ``text`` with its ``$`` references resolved by ``mapping`` (``mapping_for``)."""
    out, checkpoint, cursor = [], 0, 0
    while cursor < len(text):
        if text[cursor] == "$" and cursor + 1 < len(text):
            out.append(text[checkpoint:cursor])
            read, is_var, advance = _read_variable_name(text[cursor + 1:])
            out.append(mapping(read) if is_var else read)
            cursor += advance
            checkpoint = cursor + 1
        cursor += 1
    return "".join(out) + text[checkpoint:]


def container_env(container: Mapping, value_from: Callable[[Mapping], str],
                  completion_index: int | None = None) -> dict[str, str]:
    """The container's env as the kubelet resolves it, in declaration order (``makeEnvironmentVariables``).
    ``value_from(entry)``: the value of an entry with ``valueFrom`` (the downward API), or raise.
    ``completion_index``: an Indexed Job's pod index, added as the Job controller adds it."""
    entries = list(container.get("env", []))
    if completion_index is not None and not any(e["name"] == "JOB_COMPLETION_INDEX" for e in entries):
        entries.append({"name": "JOB_COMPLETION_INDEX", "valueFrom": {"fieldRef": {
            "fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}})
    declared: dict[str, str] = {}
    mapping = mapping_for(declared)  # sees each variable once it is declared, as tmpEnv does
    for e in entries:
        value = e.get("value", "")
        if value:
            value = expand(value, mapping)
        elif e.get("valueFrom"):
            value = value_from(e)
        declared[e["name"]] = value
    return declared


def command_and_args(container: Mapping, env: Mapping[str, str]) -> list[str]:
    """``ExpandContainerCommandAndArgs``: the container's command then args, each expanded against ``env``
    (``container_env``). An empty result means the image's entrypoint, which only an image knows."""
    mapping = mapping_for(env)
    return [expand(s, mapping) for s in (*container.get("command", []), *container.get("args", []))]
