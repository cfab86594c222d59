"""YAML read strictly, with the line of each key: a key given twice in one mapping (which PyYAML resolves silently) and
a whole number longer than any setting takes are refused in one line naming the file and both lines; `lines` and
`key_place` give the messages of the config and of task files the line of the key they name.

The same characters mean the same value in a YAML file and on the command line: of YAML 1.1's implicit types the
reader keeps only the forms a flag reads alike (`true`/`false`, a decimal whole number without a leading zero, a
decimal fraction with a point, null). Every other plain scalar stays the text written (`010`, `0x10`, `1:30`, `1_000`,
`yes`/`no`/`on`/`off`, `.inf`, a date), and its key's declared type makes of it what it makes of the flag
(`values._coerce`: `no` is false for a true/false key and the word for a string key; `010` is refused everywhere)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import re

import yaml

from electra.config.errors import ConfigError
from electra.config.text_files import MAX_DIGITS, read_text

__all__ = ['load_yaml', 'yaml_key_lines', 'key_place']


class _DuplicateKey(yaml.YAMLError):
    "A key given twice in one YAML mapping, on these lines (from 1)."
    def __init__(self, key, first: int, second: int): self.key, self.first, self.second = key, first, second


class _TooLong(yaml.MarkedYAMLError):
    "A whole number with more digits than any setting takes, at this mark."


class _UniqueKeyLoader(yaml.SafeLoader):
    """yaml.SafeLoader that refuses a key given twice in one mapping, which PyYAML resolves silently (the last wins),
    and a whole number of more than `MAX_DIGITS` digits (in any base), naming its line."""

    def construct_yaml_int(self, node):
        digits = len(node.value.lstrip('+-').replace('_', ''))
        value = super().construct_yaml_int(node) if digits <= MAX_DIGITS * 4 else None  # (hex: 4 bits a digit)
        if value is None or abs(value).bit_length() > MAX_DIGITS * 10 // 3:
            raise _TooLong(None, None, f'a whole number of more than {MAX_DIGITS} digits, which no setting takes',
                           node.start_mark)
        return value

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            seen = {}
            for key_node, _ in node.value:
                if key_node.tag == 'tag:yaml.org,2002:merge': continue  # a key beside `<<: *x` overrides it: YAML's rule
                key = self.construct_object(key_node, deep=True)
                try: first = seen.setdefault(key, key_node)
                except TypeError: continue  # an unhashable key: SafeLoader's own error follows
                if first is not key_node: raise _DuplicateKey(key, first.start_mark.line + 1, key_node.start_mark.line + 1)
        return super().construct_mapping(node, deep)


_UniqueKeyLoader.add_constructor('tag:yaml.org,2002:int', _UniqueKeyLoader.construct_yaml_int)
# YAML 1.1's implicit types replaced by the forms a flag reads alike (the module's docstring); the others are text.
# Each form is one YAML 1.1 reads alike too, so what yaml.safe_dump writes (a run's config.yaml) reads back the same.
_UniqueKeyLoader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag.rsplit(':', 1)[1] not in ('bool', 'int', 'float', 'timestamp', 'value')]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()}
for _tag, _pattern, _first in (
        ('bool', r'true|True|TRUE|false|False|FALSE', 'tTfF'),
        ('int', r'0|-?[1-9][0-9]*', '-0123456789'),
        ('float', r'(?:[-+]?[0-9]+\.[0-9]*|\.[0-9]+)(?:[eE][-+][0-9]+)?', '-+.0123456789')):
    _UniqueKeyLoader.add_implicit_resolver(f'tag:yaml.org,2002:{_tag}', re.compile(f'^(?:{_pattern})$'), list(_first))


def _yaml_problem(e: Exception) -> str:
    "What a YAML reader refused in a text, in one line: 'line L, column C: <the problem>' where it knows the place."
    if isinstance(e, RecursionError): return 'nested deeper than Python can read'
    if not isinstance(e, yaml.MarkedYAMLError): return ' '.join(str(e).split())
    mark = e.problem_mark or e.context_mark
    at = f'line {mark.line + 1}, column {mark.column + 1}: ' if mark is not None else ''
    return at + ' '.join(f'{e.problem or ""} {f"({e.context})" if e.context and e.problem else e.context or ""}'.split())


def _key_lines(node, above: tuple = ()) -> dict[tuple, int]:
    "The line (from 1) of each key of a YAML mapping node, and of the mappings inside it, by its path of keys."
    lines = {}
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode):
                lines[(*above, key.value)] = key.start_mark.line + 1
                lines.update(_key_lines(value, (*above, key.value)))
    return lines


def load_yaml(text: str, where: str, lines: dict | None = None) -> Any:
    """YAML `text` (the contents of `where`: a file, or a command-line value) as SafeLoader reads it, or a one-line
    `ConfigError` naming `where`: a key given twice in one mapping (both lines), text that is not YAML, a whole
    number too long to be a setting, nesting deeper than Python's recursion (the place where the reader knows it).
    `lines`: filled with the line of each key (`_key_lines`), for messages that name it."""
    loader = None
    try:
        loader = _UniqueKeyLoader(text)  # (its reader refuses characters YAML does not allow, such as NUL, at once)
        node = loader.get_single_node()
        if lines is not None: lines.update(_key_lines(node))
        return None if node is None else loader.construct_document(node)
    except _DuplicateKey as e:
        where_lines = f', on lines {e.first} and {e.second}' if e.first != e.second else ''
        raise ConfigError(f"{where}: key {e.key!r} is given twice{where_lines}; the second would silently replace the "
                          "first. Keep one of them.") from None
    except _TooLong as e: raise ConfigError(f"{where}: {_yaml_problem(e)}.") from None
    except (yaml.YAMLError, RecursionError) as e:
        raise ConfigError(f"{where}: not valid YAML ({_yaml_problem(e)}).") from None
    finally:
        if loader is not None: loader.dispose()


def yaml_key_lines(path: str | Path) -> dict[tuple, int]:
    "The line of each key of a YAML file that was read without error before (a task file), by its path of keys."
    lines: dict[tuple, int] = {}
    load_yaml(read_text(path), str(path), lines)
    return lines


def key_place(path: str | Path, key: str) -> str:
    "'<path>: line N' for a top-level key of a YAML file, where it is written; '<path>' where no line is known."
    try: line = yaml_key_lines(path).get((key,))
    except ConfigError: line = None
    return f'{path}: line {line}' if line else str(path)
