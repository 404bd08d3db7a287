"""Reading a model server's command line: which server it is, its flags, the port it listens on.

Supported forms (docs/upstream-facts.md):

- ``vllm serve MODEL [flags]`` and ``python -m vllm.entrypoints.openai.api_server [flags]``:
  ``--port N`` / ``--port=N``, default 8000;
- KServe's ``huggingfaceserver`` (``python -m huggingfaceserver``): ``--http_port``, default 8080;
- the same servers started by their image's entrypoint (only ``args`` in the spec), recognized
  by the image name (``vllm/vllm-openai``, ``kserve/huggingfaceserver``);
- ``sh -c "..."`` wrappers, split as the shell would split them.

Kubernetes expands ``$(VAR)`` in command and args from the container's literal ``env`` values
before the process starts; the parser does the same. A reference it cannot resolve (a variable
set from a Secret, ConfigMap or the downward API, or not set at all) leaves the port unknown:
the parser never guesses a value.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

VLLM = "vllm"
HUGGINGFACESERVER = "huggingfaceserver"
UNKNOWN = "unknown"

DEFAULT_PORTS = {VLLM: 8000, HUGGINGFACESERVER: 8080}
PORT_FLAGS = {VLLM: "port", HUGGINGFACESERVER: "http-port"}

_SHELLS = frozenset({"sh", "bash", "ash", "dash", "zsh"})
_K8S_REFERENCE = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")
_SHELL_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)")
# Flags of vLLM and KServe's model server that take no value; without this list the positional
# model name after e.g. ``--trust-remote-code`` would be read as the flag's value.
_BOOLEAN_FLAGS = frozenset(
    {
        "trust-remote-code",
        "enforce-eager",
        "enable-prefix-caching",
        "no-enable-prefix-caching",
        "enable-chunked-prefill",
        "no-enable-chunked-prefill",
        "disable-log-requests",
        "disable-log-stats",
        "enable-log-requests",
        "enable-auto-tool-choice",
        "disable-frontend-multiprocessing",
        "enable-lora",
        "disable-custom-all-reduce",
        "enable-docs",
        "disable-fastapi-docs",
        "return-tokens-as-token-ids",
        "enable-request-id-headers",
        "disable-sliding-window",
        "enable-expert-parallel",
        "enable-sleep-mode",
        "headless",
        "disable-uvicorn-access-log",
    }
)


@dataclass(frozen=True)
class ServerCommand:
    """What the container runs, as far as the spec tells."""

    server: str  # VLLM | HUGGINGFACESERVER | UNKNOWN
    argv: tuple[str, ...]  # the effective command line after $(VAR) expansion ("" when none is visible)
    flags: Mapping[str, str] = field(default_factory=dict)  # normalized name (dashes, no leading --) -> last value
    port: int | None = None  # the listening port, None when it cannot be told
    port_source: str = ""  # how ``port`` was found, for evidence lines
    shell_wrapped: bool = False  # started through ``sh -c``: flags cannot be appended to args

    @property
    def port_flag(self) -> str | None:
        """The flag that sets the listening port (``--port`` or ``--http_port``), or None."""
        if self.server == VLLM:
            return "--port"
        if self.server == HUGGINGFACESERVER:
            return "--http_port"
        return None

    def flag(self, name: str) -> str | None:
        return self.flags.get(normalize_flag(name))


def normalize_flag(name: str) -> str:
    """``--max_num_seqs`` and ``--max-num-seqs`` are one flag to vLLM: compare them as ``max-num-seqs``."""
    return name.lstrip("-").replace("_", "-")


def expand_k8s_references(text: str, env: Mapping[str, str]) -> str:
    """Expand ``$(VAR)`` as the kubelet does: known variables are replaced, ``$$`` escapes, others stay."""

    def replace(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        variable = match.group(1)
        return env[variable] if variable in env else match.group(0)

    return _K8S_REFERENCE.sub(replace, text)


def literal_env(container: Mapping[str, Any]) -> dict[str, str]:
    """The container's env entries with literal values (``valueFrom`` entries cannot be read from the spec)."""
    values: dict[str, str] = {}
    for entry in container.get("env") or []:
        if "value" in entry and entry.get("name"):
            values[str(entry["name"])] = expand_k8s_references(str(entry["value"] or ""), values)
    return values


def parse_container(container: Mapping[str, Any]) -> ServerCommand:
    """Parse a container spec (``command``, ``args``, ``env``, ``image``)."""
    return parse_command(
        [str(part) for part in container.get("command") or []],
        [str(part) for part in container.get("args") or []],
        literal_env(container),
        str(container.get("image") or ""),
    )


def parse_command(
    command: Sequence[str], args: Sequence[str], env: Mapping[str, str] | None = None, image: str = ""
) -> ServerCommand:
    """Parse a command line given as the container's ``command`` and ``args``."""
    variables = dict(env or {})
    argv = [expand_k8s_references(part, variables) for part in [*command, *args]]
    shell_wrapped = False
    if _is_shell_script(argv):
        shell_wrapped = True
        argv = _split_shell_script(argv[argv.index("-c") + 1], variables)
    server, flag_tokens = _find_server(argv, has_command=bool(command), image=image)
    flags = parse_flags(flag_tokens)
    port, source = _listening_port(server, flags)
    return ServerCommand(server, tuple(argv), flags, port, source, shell_wrapped)


def parse_flags(tokens: Sequence[str]) -> dict[str, str]:
    """``--name value`` and ``--name=value`` pairs (the last occurrence wins, as with argparse)."""
    flags: dict[str, str] = {}
    index = 0
    while index < len(tokens):
        token = tokens[index]
        index += 1
        if not token.startswith("--") or token == "--":
            continue
        name, separator, value = token.partition("=")
        key = normalize_flag(name)
        if separator:
            flags[key] = value
        elif key not in _BOOLEAN_FLAGS and index < len(tokens) and not tokens[index].startswith("--"):
            flags[key] = tokens[index]
            index += 1
        else:
            flags[key] = ""
    return flags


def _is_shell_script(argv: Sequence[str]) -> bool:
    return (
        len(argv) >= 3
        and argv[0].rsplit("/", 1)[-1] in _SHELLS
        and "-c" in argv[1:]
        and argv.index("-c") + 1 < len(argv)
    )


def _split_shell_script(script: str, env: Mapping[str, str]) -> list[str]:
    """The words of the script's command that starts a known server (``$VAR`` expanded from literal env)."""

    def replace(match: re.Match[str]) -> str:
        variable = match.group(1) or match.group(3)
        if variable in env:
            return env[variable]
        if match.group(2) is not None:
            return match.group(2)
        return match.group(0)

    try:
        words = shlex.split(_SHELL_REFERENCE.sub(replace, script))
    except ValueError:
        return script.split()
    segments: list[list[str]] = [[]]
    for word in words:
        if word in ("&&", "||", ";", "|"):
            segments.append([])
        else:
            segments[-1].append(word.rstrip(";"))
    for segment in segments:
        if _find_server(segment, has_command=True, image="")[0] != UNKNOWN:
            return [word for word in segment if word != "exec"]
    return words


def _find_server(argv: Sequence[str], has_command: bool, image: str) -> tuple[str, list[str]]:
    """(server, the tokens after the server's entry point)."""
    for index, token in enumerate(argv):
        base = token.rsplit("/", 1)[-1]
        following = argv[index + 1] if index + 1 < len(argv) else ""
        if base == "vllm" and following == "serve":
            return VLLM, list(argv[index + 2 :])
        if token == "-m" and following in ("vllm.entrypoints.openai.api_server", "vllm.entrypoints.api_server"):
            return VLLM, list(argv[index + 2 :])
        if token == "-m" and following == HUGGINGFACESERVER:
            return HUGGINGFACESERVER, list(argv[index + 2 :])
        if base == HUGGINGFACESERVER:
            return HUGGINGFACESERVER, list(argv[index + 1 :])
    if not has_command:
        # The image's entrypoint runs the server; the spec holds only args.
        lowered = image.lower()
        if "huggingfaceserver" in lowered:
            return HUGGINGFACESERVER, list(argv)
        if "vllm-openai" in lowered or "/vllm:" in lowered or lowered.startswith("vllm:"):
            return VLLM, list(argv)
    return UNKNOWN, []


def _listening_port(server: str, flags: Mapping[str, str]) -> tuple[int | None, str]:
    if server == UNKNOWN:
        return None, "unknown server: the command line names neither vLLM nor KServe's huggingfaceserver"
    flag = PORT_FLAGS[server]
    shown = "--port" if server == VLLM else "--http_port"
    if flag not in flags:
        return DEFAULT_PORTS[server], f"{shown} not set: {server} default {DEFAULT_PORTS[server]}"
    value = flags[flag]
    port = literal_int(value)
    if port is not None:
        return port, f"{shown}={value}"
    return None, f"{shown}={value!r} cannot be resolved from the container spec"


# Short spellings that vLLM's engine arguments accept for a few long flags.
SHORT_FLAG_ALIASES = {"-tp": "tensor-parallel-size", "-pp": "pipeline-parallel-size", "-dp": "data-parallel-size"}


def flag_value(command: ServerCommand, name: str) -> str | None:
    """The value of a flag given long (``--tensor-parallel-size 2``, ``=2``) or short (``-tp 2``, ``-tp=2``).

    The argv is read in order and the last spelling wins, as argparse does.
    """
    wanted = normalize_flag(name)
    value = command.flag(name)
    if not any(alias == wanted for alias in SHORT_FLAG_ALIASES.values()):
        return value
    tokens = list(command.argv)
    found: str | None = None
    for index, token in enumerate(tokens):
        head, separator, tail = token.partition("=")
        if token.startswith("--"):
            key = normalize_flag(head)
        elif head in SHORT_FLAG_ALIASES:
            key = SHORT_FLAG_ALIASES[head]
        else:
            continue
        if key != wanted:
            continue
        if separator:
            found = tail
        elif index + 1 < len(tokens) and not tokens[index + 1].startswith("-"):
            found = tokens[index + 1]
    return found if found is not None else value


def int_flag(command: ServerCommand, name: str) -> int | None:
    """An integer flag (long or short spelling); None when absent or not a literal integer."""
    value = flag_value(command, name)
    return literal_int(value) if value is not None else None


def literal_int(value: str) -> int | None:
    """A plain decimal integer as written on a command line, else None.

    ASCII digits only, and not absurdly long: ``str.isdigit`` also accepts "²" and int() refuses more than
    4300 digits; neither can come from a working server command line.
    """
    text = value.strip()
    return int(text) if text.isascii() and text.isdigit() and len(text) <= 18 else None
