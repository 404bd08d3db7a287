"""JSON and YAML from outside, parsed within the limits of :mod:`nbhelpers.util.limits`.

- Nesting depth is bounded (:data:`~nbhelpers.util.limits.MAX_NESTING_DEPTH`): a document nested
  thousands of levels deep would otherwise end in ``RecursionError`` in the parser or in whatever
  walks it next.
- Integers are bounded in digits (:data:`~nbhelpers.util.limits.MAX_INT_DIGITS`): Python refuses to
  convert more than 4,300 digits with a ``ValueError`` that no parser documents, and smaller giants
  still cost quadratic time.
- YAML aliases may repeat a bounded number of nodes (:data:`~nbhelpers.util.limits.MAX_YAML_ALIAS_NODES`,
  counted at their expanded size, so a "billion laughs" is refused after a few thousand nodes);
  an alias inside the node it names (a recursive structure) is refused.
- YAML is read with the safe loader (libyaml's scanner when available). Only JSON's types come
  out: timestamps stay the strings they were written as (as the API server sends them), and
  ``!!binary`` / ``!!set`` are refused.

Failures: ``LimitExceeded`` (a ``RunbookError``) over a limit; otherwise what the parsers raise for
text that is not JSON (``ValueError``) or not YAML (``yaml.YAMLError``). Callers add which file or
answer it was.
"""

from __future__ import annotations

import json
from typing import Any

import yaml
from yaml.composer import Composer, ComposerError
from yaml.constructor import ConstructorError
from yaml.events import AliasEvent
from yaml.nodes import Node

from nbhelpers.util.limits import MAX_INT_DIGITS, MAX_NESTING_DEPTH, MAX_YAML_ALIAS_NODES

# libyaml's scanner and parser are ~10x faster than the pure-Python ones on large kubectl dumps;
# composing stays in Python (below) so that depth and aliases can be counted.
_BASE_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_json(data: str | bytes) -> Any:
    """``json.loads`` within the depth and integer limits."""
    digits = MAX_INT_DIGITS.value

    def parse_int(text: str) -> int:
        if len(text.lstrip("-")) > digits:
            raise MAX_INT_DIGITS.exceeded(f"an integer of {len(text.lstrip('-')):,} digits")
        return int(text)

    try:
        value = json.loads(data, parse_int=parse_int)
    except RecursionError:
        raise MAX_NESTING_DEPTH.exceeded("a document nested too deep to parse") from None
    check_depth(value)
    return value


def check_depth(value: Any) -> None:
    """``LimitExceeded`` when lists and maps in ``value`` nest deeper than the limit (iterative: never recurses)."""
    limit = MAX_NESTING_DEPTH.value
    level = [value] if isinstance(value, (dict, list, tuple)) else []
    depth = 0
    while level:
        depth += 1
        if depth > limit:
            raise MAX_NESTING_DEPTH.exceeded(f"a document nested more than {limit:,} levels deep")
        following: list[Any] = []
        for node in level:
            children = node.values() if isinstance(node, dict) else node
            following.extend(child for child in children if isinstance(child, (dict, list, tuple)))
        level = following


def load_yaml(text: str) -> Any:
    """The single document of ``text`` (``None`` when empty), as ``yaml.safe_load`` but bounded."""
    return yaml.load(text, Loader=BoundedLoader)


def load_yaml_documents(text: str) -> list[Any]:
    """Every document of a multi-document ``text``, as ``yaml.safe_load_all`` but bounded."""
    return list(yaml.load_all(text, Loader=BoundedLoader))


class _BoundedComposer(Composer):
    """``compose_node`` that counts nesting depth and the nodes each alias repeats."""

    _max_depth: int
    _max_repeated: int

    def compose_document(self) -> Node | None:
        self._depth = 0
        self._composed = 0  # nodes in the document so far, aliases counted at their full size
        self._repeated = 0  # of which repeated through aliases
        self._sizes: dict[str, int] = {}  # finished anchored nodes: anchor -> size
        node: Node | None = super().compose_document()
        self._sizes = {}
        return node

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        event = self.peek_event()  # type: ignore[attr-defined]  # the parser's, mixed in
        if isinstance(event, AliasEvent):
            node: Node | None = super().compose_node(parent, index)  # refuses an undefined alias
            size = self._sizes.get(str(event.anchor))
            if size is None:
                mark: Any = event.start_mark  # libyaml's Mark, or the pure-Python one
                raise ComposerError(None, None, f"found an alias *{event.anchor} inside the node it names", mark)
            self._repeated += size
            self._composed += size
            if self._repeated > self._max_repeated:
                raise MAX_YAML_ALIAS_NODES.exceeded(f"YAML aliases repeat more than {self._max_repeated:,} nodes")
            return node
        self._depth += 1
        if self._depth > self._max_depth:
            raise MAX_NESTING_DEPTH.exceeded(f"a document nested more than {self._max_depth:,} levels deep")
        before = self._composed
        self._composed += 1
        node = super().compose_node(parent, index)
        self._depth -= 1
        if event.anchor is not None:
            self._sizes[str(event.anchor)] = self._composed - before
        return node


class BoundedLoader(_BoundedComposer, _BASE_LOADER):  # type: ignore[misc]
    """A SafeLoader (on libyaml when available) within the depth, alias and integer limits."""

    def __init__(self, stream: str | bytes) -> None:
        _BASE_LOADER.__init__(self, stream)
        Composer.__init__(self)
        self._max_depth = MAX_NESTING_DEPTH.value
        self._max_repeated = MAX_YAML_ALIAS_NODES.value
        self._max_digits = MAX_INT_DIGITS.value

    def construct_bounded_int(self, node: Any) -> int:
        digits = len(str(node.value).replace("_", "").lstrip("+-").removeprefix("0x").removeprefix("0b"))
        if digits > self._max_digits:
            raise MAX_INT_DIGITS.exceeded(f"an integer of {digits:,} digits")
        value: int = yaml.SafeLoader.construct_yaml_int(self, node)
        return value

    def construct_text(self, node: Any) -> str:
        return str(self.construct_scalar(node))

    def refuse_tag(self, node: Any) -> None:
        raise ConstructorError(
            None, None, f"{node.tag} values are not JSON: a Kubernetes object never holds one", node.start_mark
        )


BoundedLoader.add_constructor("tag:yaml.org,2002:int", BoundedLoader.construct_bounded_int)
BoundedLoader.add_constructor("tag:yaml.org,2002:timestamp", BoundedLoader.construct_text)
BoundedLoader.add_constructor("tag:yaml.org,2002:binary", BoundedLoader.refuse_tag)
BoundedLoader.add_constructor("tag:yaml.org,2002:set", BoundedLoader.refuse_tag)
