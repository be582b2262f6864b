"""YAML documents read within limits, with the line of every value (for FILE:LINE errors):
the one reader for inventories, Ansible files, the policy and a job's training config.

Documents are built in one pass over libyaml's events: the data, each value's line, the depth
limit and the alias expansion budget together, in time linear in the file; aliases and merge
keys (`<<`) as PyYAML builds them. A document using what that pass leaves out (explicit tags
on mappings or lists, a mapping, list or alias as a key, `=` keys, an anchor defined twice,
an undefined alias) goes the general way: a depth pre-scan (libyaml's composer overflows the C
stack at a few thousand levels and kills the process), PyYAML's composer, the expansion budget,
PyYAML's constructor. Both refuse duplicate keys, which PyYAML would resolve to the last one.

A stricter file (the policy) may also refuse aliases and keys that are not names.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import yaml

from computefence.errors import ConfigError, InputLimitError
from computefence.files import read_config_text

# Far beyond any real inventory (Ansible children nest a few levels), far below what
# PyYAML's recursive composers survive.
MAX_YAML_DEPTH = 100
# Values in a document with every alias counted each time it is used: a 100,000-host
# inventory with merged defaults is about 2,000,000; an alias bomb is billions.
MAX_YAML_NODES = 4_000_000

# libyaml's parser where PyYAML was built with it (several times faster on 1,000-host files).
SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

_STR_TAG = "tag:yaml.org,2002:str"
_INT_TAG = "tag:yaml.org,2002:int"
_NAME_TAGS = (_STR_TAG, _INT_TAG, "tag:yaml.org,2002:float")
_MAP_TAGS = (None, "!", "tag:yaml.org,2002:map")
_SEQ_TAGS = (None, "!", "tag:yaml.org,2002:seq")
# Keys PyYAML's constructor treats specially: `<<` merges, `=` is the default value.
_MERGE_TAG = "tag:yaml.org,2002:merge"
_VALUE_TAG = "tag:yaml.org,2002:value"


class MappingMarks:
    """Where a mapping of a loaded document starts (1-based `line`), and each key's line and
    its value's marks (`keys`, by the key as written)."""

    __slots__ = ("keys", "line")

    def __init__(self, line: int):
        self.line = line
        self.keys: dict[str, tuple[int, Marks]] = {}


class ListMarks:
    """Where a list of a loaded document starts (1-based `line`), and each item's marks."""

    __slots__ = ("items", "line")

    def __init__(self, line: int):
        self.line = line
        self.items: list[Marks] = []


# A value's marks; a scalar's are just its line.
Marks = MappingMarks | ListMarks | int


# What libyaml's scanner says when it refuses nesting itself, before our own count sees it.
_LIBYAML_TOO_DEEP = "exceeded maximum nesting depth"


class _YamlLimitError(yaml.MarkedYAMLError):
    """A document over MAX_YAML_DEPTH or MAX_YAML_NODES."""


class _NeedsComposer(Exception):
    """The document uses something only the general way builds."""


def _too_deep(mark: Any) -> _YamlLimitError:
    return _YamlLimitError(problem=f"nested more than {MAX_YAML_DEPTH} levels deep", problem_mark=mark)


def _too_large(mark: Any) -> _YamlLimitError:
    return _YamlLimitError(
        problem=f"expands to more than {MAX_YAML_NODES:,} values (aliases counted each time they are used)",
        problem_mark=mark,
    )


def _self_reference(mark: Any) -> _YamlLimitError:
    return _YamlLimitError(problem="an alias refers to a value that contains it", problem_mark=mark)


class YamlSyntaxError(ConfigError):
    """Not one YAML document: the `line` where the parser knows it, what it `problem` and
    its `context` say (a caller may word them its own way)."""

    def __init__(self, path: Path | str, line: int | None, problem: str | None, context: str | None = None):
        self.line, self.problem, self.context = line, problem, context
        said = ", ".join(part for part in (context, problem) if part) or "invalid YAML"
        super().__init__(f"{path}{'' if line is None else f':{line}'}: YAML syntax error: {said}")


class DuplicateKeyError(ConfigError):
    """A mapping key written twice (`key` as written), which PyYAML would take the last of."""

    def __init__(self, path: Path | str, key: str, line: int, first_line: int):
        self.key, self.line, self.first_line = key, line, first_line
        super().__init__(f"{path}:{line}: duplicate key {key!r} (first at line {first_line})")


class _Rules:
    """What a caller's file may not hold beyond the limits: aliases, keys that are not names."""

    __slots__ = ("aliases", "name_keys", "path", "what")

    def __init__(self, path: Path | str, what: str, *, aliases: bool, name_keys: bool):
        self.path, self.what, self.aliases, self.name_keys = path, what, aliases, name_keys

    def no_alias(self, line: int) -> ConfigError:
        return ConfigError(f"{self.path}:{line}: YAML aliases (*name) are not allowed in a {self.what}")

    def not_a_name(self, line: int, key: str) -> ConfigError:
        return ConfigError(f"{self.path}:{line}: a key must be a name, not {key}")


def load_yaml_document(
    path: Path | str,
    what: str,
    *,
    loader_class: type[yaml.SafeLoader] = SAFE_LOADER,
    text: str | None = None,
    aliases: bool = True,
    name_keys: bool = False,
) -> tuple[Any, Marks | None]:
    """Parse one YAML document (the file at `path`, or `text` said to come from it); returns
    (data, marks), (None, None) when it holds none. `what` names the file in errors.

    Duplicate mapping keys are errors, and so are documents nested or expanding beyond
    MAX_YAML_DEPTH / MAX_YAML_NODES; with aliases=False any alias is, and with
    name_keys=True any key but a string or a number.
    """
    text = read_config_text(Path(path), what) if text is None else text
    rules = _Rules(path, what, aliases=aliases, name_keys=name_keys)
    try:
        try:
            return _load_in_one_pass(rules, text, loader_class)
        except _NeedsComposer:
            return _load_composed(rules, text, loader_class)
    except _YamlLimitError as exc:
        line = exc.problem_mark.line + 1 if exc.problem_mark else 1
        raise InputLimitError(f"{path}:{line}: {exc.problem}; refusing to read it") from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        if _LIBYAML_TOO_DEEP in (exc.problem or ""):  # libyaml's own limit, from PyYAML 6.0.4 on
            where = f":{mark.line + 1}" if mark else ""
            raise InputLimitError(f"{path}{where}: {_too_deep(mark).problem}; refusing to read it") from None
        raise YamlSyntaxError(path, mark.line + 1 if mark else None, exc.problem, exc.context) from None
    except yaml.YAMLError as exc:
        raise YamlSyntaxError(path, None, str(exc).splitlines()[0]) from None


# ---------------------------------------------------------------- one pass over the events


def _load_in_one_pass(rules: _Rules, text: str, loader_class: type[yaml.SafeLoader]) -> tuple[Any, Marks | None]:
    loader = loader_class(text)
    try:
        if loader.yaml_path_resolvers or None in loader.yaml_implicit_resolvers:
            raise _NeedsComposer
        return _build(rules, loader)
    finally:
        loader.dispose()


class _Open:
    """A mapping or list being built: its data, its marks, its values counted with aliases
    expanded, and for a mapping the pending key and the mappings merged into it (`<<`)."""

    __slots__ = ("anchor", "data", "key", "key_line", "key_marks", "key_text", "marks", "merges", "size", "start_mark")

    def __init__(self, data: Any, marks: MappingMarks | ListMarks, start_mark: Any, anchor: str | None):
        self.data, self.marks = data, marks
        # A mapping's keys so far; None for a list.
        self.key_marks = marks.keys if isinstance(marks, MappingMarks) else None
        self.key: Any = _NO_KEY
        self.key_text, self.key_line = "", 0
        self.size, self.start_mark, self.anchor = 1, start_mark, anchor
        self.merges: list[tuple[dict[str, Any], MappingMarks]] = []


_NO_KEY = object()
_MERGE = object()


def _build(rules: _Rules, loader: Any) -> tuple[Any, Marks | None]:
    get_event = loader.get_event
    resolve = loader.resolve
    # First characters a plain scalar needs to be anything but a string (a number, a bool, null...).
    typed_starts = loader.yaml_implicit_resolvers
    # Such scalars by their text: (tag, value); ports and users repeat on every host.
    implicit: dict[str, tuple[str, Any]] = {}
    # Anchored values: (data, marks, values counted with aliases expanded). Like PyYAML, every
    # alias of one anchor refers to the same object.
    anchors: dict[str, tuple[Any, Marks, int]] = {}
    open_anchors: set[str] = set()
    scalar_event, alias_event = yaml.ScalarEvent, yaml.AliasEvent
    mapping_start, mapping_end = yaml.MappingStartEvent, yaml.MappingEndEvent
    sequence_start, sequence_end = yaml.SequenceStartEvent, yaml.SequenceEndEvent
    no_key, max_nodes = _NO_KEY, MAX_YAML_NODES

    get_event()  # stream start
    event = get_event()
    if isinstance(event, yaml.StreamEndEvent):
        return None, None
    document_start = event
    current: _Open | None = None  # the innermost mapping or list being built
    stack: list[_Open | None] = []
    root: tuple[Any, Marks] | None = None
    while root is None:
        event = get_event()
        cls = event.__class__
        size = 1
        if cls is scalar_event:
            text = event.value
            line = event.start_mark.line + 1
            tag = event.tag
            if (tag is None or tag == "!") and not (event.implicit[0] and text[:1] in typed_starts):
                tag, value = _STR_TAG, text
            elif tag is None or tag == "!":
                found = implicit.get(text)
                if found is None:
                    found = implicit[text] = _scalar(
                        rules, loader, resolve(yaml.ScalarNode, text, event.implicit), event
                    )
                tag, value = found
            else:
                tag, value = _scalar(rules, loader, tag, event)
            if event.anchor is not None:
                _anchor(anchors, event.anchor, (value, line, 1))
            if current is not None and current.key is no_key and current.key_marks is not None:
                if tag == _STR_TAG and text not in current.key_marks:  # the common key, at once
                    current.key, current.key_text, current.key_line = value, text, line
                    current.size += 1
                else:
                    _take_key(rules, current, current.key_marks, tag, text, value, line, event)
                continue
            if tag == _MERGE_TAG:
                raise _NeedsComposer  # `<<` as a value: PyYAML's error
            child: Marks = line
        elif cls is mapping_start or cls is sequence_start:
            if event.tag not in (_MAP_TAGS if cls is mapping_start else _SEQ_TAGS):
                raise _NeedsComposer
            if current is not None and current.key is no_key and current.key_marks is not None:
                raise _NeedsComposer  # a mapping or list as a key
            if len(stack) >= MAX_YAML_DEPTH:
                raise _too_deep(event.start_mark)
            if event.anchor is not None:
                open_anchors.add(event.anchor)
            stack.append(current)
            line = event.start_mark.line + 1
            if cls is mapping_start:
                current = _Open({}, MappingMarks(line), event.start_mark, event.anchor)
            else:
                current = _Open([], ListMarks(line), event.start_mark, event.anchor)
            continue
        elif cls is mapping_end or cls is sequence_end:
            done = current
            assert done is not None  # the parser ends only what it started
            value, child, size = done.data, done.marks, done.size
            if done.merges and isinstance(child, MappingMarks):
                value, child = _merged(value, child, done.merges)
            if done.anchor is not None:
                open_anchors.discard(done.anchor)
                _anchor(anchors, done.anchor, (value, child, size))
            current = stack.pop()
        elif cls is alias_event:
            if not rules.aliases:  # refused where the value it repeats is
                raise rules.no_alias(
                    line_at(anchors[event.anchor][1]) if event.anchor in anchors else event.start_mark.line + 1
                )
            if event.anchor in open_anchors:
                raise _self_reference(event.start_mark)
            if event.anchor not in anchors or (
                current is not None and current.key is no_key and current.key_marks is not None
            ):
                raise _NeedsComposer  # an undefined alias (PyYAML's error), or an alias as a key
            value, child, size = anchors[event.anchor]
        else:  # only the events above come between a document's start and its value's end
            raise yaml.YAMLError(f"unexpected {cls.__name__}")
        if current is None:
            root = (value, child)
            continue
        current.size += size
        if current.size > max_nodes:
            raise _too_large(current.start_mark)
        marks = current.marks
        if isinstance(marks, ListMarks):
            current.data.append(value)
            marks.items.append(child)
        elif current.key is _MERGE:
            _add_merge(current, value, child)
        else:
            current.data[current.key] = value
            marks.keys[current.key_text] = (current.key_line, child)
            current.key = no_key
    get_event()  # document end
    event = get_event()
    if not isinstance(event, yaml.StreamEndEvent):
        raise yaml.composer.ComposerError(
            "expected a single document in the stream",
            document_start.start_mark,
            "but found another document",
            event.start_mark,
        )
    return root


def _anchor(anchors: dict[str, tuple[Any, Marks, int]], name: str, anchored: tuple[Any, Marks, int]) -> None:
    if name in anchors:
        raise _NeedsComposer  # the same name anchored twice: left to PyYAML
    anchors[name] = anchored


def _take_key(
    rules: _Rules,
    mapping: _Open,
    keys: dict[str, tuple[int, Marks]],
    tag: str,
    text: str,
    value: Any,
    line: int,
    event: Any,
) -> None:
    if tag == _MERGE_TAG:
        mapping.key, mapping.size = _MERGE, mapping.size + 1
        return
    if rules.name_keys and (not isinstance(value, (str, int, float)) or isinstance(value, bool)):
        raise rules.not_a_name(line, repr(value))
    if text in keys and text != "<<":
        raise DuplicateKeyError(rules.path, text, line, keys[text][0])
    try:
        hash(value)
    except TypeError:
        raise yaml.constructor.ConstructorError(
            "while constructing a mapping", None, "found unhashable key", event.start_mark
        ) from None
    mapping.key, mapping.key_text, mapping.key_line = value, text, line
    mapping.size += 1


def _add_merge(mapping: _Open, value: Any, marks: Marks) -> None:
    """One `<<: MAPPING` in a mapping. A list of mappings, or a second `<<`, is left to PyYAML's
    own constructor: which of them wins changed in PyYAML 6.0.4 (the last, where 6.0.3 and the
    YAML merge spec say the first), and Ansible reads the file with the PyYAML installed."""
    mapping.key = _NO_KEY
    if mapping.merges or not (isinstance(value, dict) and isinstance(marks, MappingMarks)):
        raise _NeedsComposer  # also not a mapping: PyYAML's error says what was found
    mapping.merges.append((value, marks))


def _merged(
    own: dict[str, Any], own_marks: MappingMarks, merges: list[tuple[dict[str, Any], MappingMarks]]
) -> tuple[dict[str, Any], MappingMarks]:
    """A mapping's merged keys first, then its own, each later one winning (as PyYAML builds it)."""
    data: dict[str, Any] = {}
    marks = MappingMarks(own_marks.line)
    for merged, merged_marks in merges:
        data.update(merged)
        marks.keys.update(merged_marks.keys)
    data.update(own)
    marks.keys.update(own_marks.keys)
    return data, marks


def _scalar(rules: _Rules, loader: Any, tag: str, event: Any) -> tuple[str, Any]:
    """(tag, value) of a scalar, built by the loader's own constructor for its tag."""
    if tag in (_STR_TAG, _MERGE_TAG):  # a merge key is its text until it is one
        return tag, event.value
    if tag == _VALUE_TAG:
        raise _NeedsComposer
    node = yaml.ScalarNode(tag, event.value, event.start_mark, event.end_mark, style=event.style)
    try:
        return tag, loader.construct_object(node)
    except (ValueError, TypeError, OverflowError) as exc:
        where = f"{rules.path}:{event.start_mark.line + 1}"
        if tag == _INT_TAG and len(event.value) > sys.get_int_max_str_digits():  # int() refuses it
            raise ConfigError(f"{where}: a number of {len(event.value)} digits is out of range") from None
        raise ConfigError(f"{where}: cannot read {event.value[:200]!r} as {tag}: {exc}") from None


# ---------------------------------------------------------------- the general way


def _load_composed(rules: _Rules, text: str, loader_class: type[yaml.SafeLoader]) -> tuple[Any, Marks | None]:
    loader = loader_class(text)
    try:
        alias = _check_depth(text, loader_class)
        if alias is not None and not rules.aliases:
            raise rules.no_alias(alias)
        node = loader.get_single_node()
        if node is None:
            return None, None
        if alias is not None:
            _check_expanded_size(node)
        _check_keys(rules, loader, node)
        try:
            data = loader.construct_document(node)
        except (ValueError, TypeError, OverflowError) as exc:
            raise ConfigError(f"{rules.path}: cannot read a value: {exc}") from None
        # After construction: merge keys are then listed in the mapping that merges them.
        return data, _node_marks(node, {})
    finally:
        loader.dispose()


def _check_depth(text: str, loader_class: type[yaml.SafeLoader]) -> int | None:
    """Refuse nesting past MAX_YAML_DEPTH before anything composes the document (PyYAML's
    composers recurse; libyaml's overflows the C stack at a few thousand levels and kills the
    process). Returns the line of the value the document's first alias repeats (of the alias
    where its anchor is not found), None where it has no alias."""
    depth = 0
    alias: int | None = None
    anchored: dict[str, int] = {}
    for event in yaml.parse(text, Loader=loader_class):
        if isinstance(event, yaml.NodeEvent) and event.anchor is not None:
            line = event.start_mark.line + 1 if event.start_mark else 1
            if isinstance(event, yaml.AliasEvent):
                alias = anchored.get(event.anchor, line) if alias is None else alias
            else:
                anchored.setdefault(event.anchor, line)
        if isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
            depth += 1
            if depth > MAX_YAML_DEPTH:
                raise _too_deep(event.start_mark)
        elif isinstance(event, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
            depth -= 1
    return alias


def _check_expanded_size(root: yaml.Node) -> None:
    """Refuse a document whose aliases expand past MAX_YAML_NODES values, or refer to themselves.

    Composing shares an aliased node, so the graph is small; what reads the data afterwards
    (validation, merging of Ansible vars) walks every expansion."""
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        if isinstance(node, yaml.SequenceNode):
            children = node.value
        elif isinstance(node, yaml.MappingNode):
            children = [part for pair in node.value for part in pair]
        else:
            children = []
        if children_done:
            open_nodes.discard(id(node))
            sizes[id(node)] = 1 + sum(sizes[id(child)] for child in children)
            if sizes[id(node)] > MAX_YAML_NODES:
                raise _too_large(node.start_mark)
            continue
        if id(node) in sizes:
            continue
        open_nodes.add(id(node))
        stack.append((node, True))
        for child in children:
            if id(child) in open_nodes:
                raise _self_reference(child.start_mark)
            if id(child) not in sizes:
                stack.append((child, False))


def _check_keys(rules: _Rules, loader: yaml.SafeLoader, root: yaml.Node) -> None:
    """Refuse a key written twice in one mapping, and where the rules want names, a key that is not one."""
    seen_nodes: set[int] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if id(node) in seen_nodes:  # aliases share nodes
            continue
        seen_nodes.add(id(node))
        if isinstance(node, yaml.MappingNode):
            first: dict[str, int] = {}
            for key, value in node.value:
                line = key.start_mark.line + 1
                if rules.name_keys and not (isinstance(key, yaml.ScalarNode) and key.tag in (*_NAME_TAGS, _MERGE_TAG)):
                    raise rules.not_a_name(line, _shown_key(loader, key))
                if isinstance(key, yaml.ScalarNode) and key.value != "<<":
                    if key.value in first:
                        raise DuplicateKeyError(rules.path, key.value, line, first[key.value])
                    first[key.value] = line
                stack.append(value)
        elif isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)


def _shown_key(loader: yaml.SafeLoader, key: yaml.Node) -> str:
    """A key as the one-pass builder shows it: the value it is built into (True, None)."""
    if not isinstance(key, yaml.ScalarNode):
        return "a mapping" if isinstance(key, yaml.MappingNode) else "a list"
    try:
        return repr(loader.construct_object(key))
    except (yaml.YAMLError, ValueError, TypeError, OverflowError):
        return repr(key.value)


def _node_marks(node: yaml.Node, done: dict[int, MappingMarks | ListMarks]) -> Marks:
    """The marks of a composed document (nesting already checked, so recursion is safe);
    a node shared through aliases gets one marks object."""
    line = node.start_mark.line + 1
    if isinstance(node, yaml.ScalarNode):
        return line
    if id(node) in done:
        return done[id(node)]
    if isinstance(node, yaml.MappingNode):
        mapping = done[id(node)] = MappingMarks(line)
        for key, value in node.value:  # a key written twice (merged, then its own) ends as its own
            if isinstance(key, yaml.ScalarNode):
                mapping.keys[key.value] = (key.start_mark.line + 1, _node_marks(value, done))
        return mapping
    items = done[id(node)] = ListMarks(line)
    items.items = [_node_marks(item, done) for item in node.value]
    return items


# ---------------------------------------------------------------- finding a value's line


def marks_at(marks: Marks | None, loc: tuple[Any, ...], *, key: bool = False) -> Marks | None:
    """The marks of the value at a data path such as ("hosts", 2, "port"), or of the deepest
    ancestor found. With key=True, a path ending in a mapping key yields the key's line."""
    for i, part in enumerate(loc):
        if isinstance(marks, ListMarks):
            if not isinstance(part, int) or not 0 <= part < len(marks.items):
                return marks
            marks = marks.items[part]
        elif isinstance(marks, MappingMarks):
            found = marks.keys.get(str(part))
            if found is None:
                return marks
            marks = found[0] if (key and i == len(loc) - 1) else found[1]
        else:
            return marks
    return marks


def line_at(marks: Marks | None, loc: tuple[Any, ...] = (), *, key: bool = False) -> int:
    """The 1-based line of the value at `loc` (see marks_at); 1 for an empty document."""
    found = marks_at(marks, loc, key=key)
    if found is None:
        return 1
    return found if isinstance(found, int) else found.line
