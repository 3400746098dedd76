"""One guarded reader for structured text (JSON and YAML) written by others.

Every document is read the same way, in this order, and any problem is one
:class:`~c2np.errors.C2NPInputError` whose message names the file, the field (``shard.count``,
``samples[3].scores.ok``, ``line 7``) and the problem, with the offending value shortened
(:func:`c2np.terminal.shortened`):

1. the file must be a regular file (a FIFO would block, ``/dev/zero`` never ends) and its size
   within a limit, checked before a byte is parsed (``document_bytes`` for JSON,
   ``yaml_bytes`` for YAML; :mod:`c2np.limits`);
2. parsing refuses YAML aliases (``*name``: a few hundred bytes of nested aliases stand for
   billions of nodes), nesting deeper than :data:`MAX_DEPTH`, integers of more than
   :data:`MAX_INT_DIGITS` digits, numbers that are not finite (``NaN``, ``.inf``, ``1e400``),
   impossible dates and (JSON) a key given twice; YAML dates become ISO strings, so a
   document holds only JSON types;
3. :func:`validate` checks the document against a schema: types, ranges, lengths, patterns,
   required and unexpected keys (a small, fast subset of JSON Schema, :data:`KEYWORDS`).
"""

from __future__ import annotations

import datetime as _dt
import functools
import json
import math
import os
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from c2np.errors import C2NPInputError
from c2np.terminal import clipped, printable, shortened

__all__ = ["MAX_DEPTH", "MAX_INT_DIGITS", "KEYWORDS", "read_json", "read_yaml", "read_text", "parse_json", "parse_yaml",
           "load_yaml_text",
           "problems", "validate"]

#: Deepest nesting of lists and objects accepted.
MAX_DEPTH = 64
#: Most digits of an integer (a 128-bit integer has 39).
MAX_INT_DIGITS = 40
#: Most problems :func:`problems` reports (the rest are counted).
MAX_PROBLEMS = 20


# --- reading ------------------------------------------------------------------------------
def _read(path: str | os.PathLike[str], limit: str, what: str) -> tuple[Path, str]:
    from c2np.fileio import read_bytes_bounded

    p = Path(path)
    try:
        data = read_bytes_bounded(p, limit=limit, regular_only=True)
    except FileNotFoundError:
        raise C2NPInputError(f"{printable(p)}: no such {what}") from None
    except OSError as exc:
        raise C2NPInputError(f"{printable(p)}: cannot read the {what} ({exc.strerror or exc})") from None
    try:
        return p, data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise C2NPInputError(f"{printable(p)}: {what} is not UTF-8 text (byte {exc.start})") from None


def read_text(path: str | os.PathLike[str], *, what: str, limit: str) -> str:
    """The UTF-8 text of the regular file ``path`` within the limit ``limit`` (step 1)."""
    return _read(path, limit, what)[1]


def read_json(path: str | os.PathLike[str], *, schema: Mapping[str, Any] | None = None,
              what: str = "JSON document", limit: str = "document_bytes", finite: bool = True) -> Any:
    """The JSON document of the file ``path``, read and checked as the module doc says
    (validated against ``schema`` when given; ``finite=False``: see :func:`parse_json`)."""
    p, text = _read(path, limit, what)
    doc = parse_json(text, source=printable(p), what=what, finite=finite)
    if schema is not None:
        validate(doc, schema, source=printable(p))
    return doc


def read_yaml(path: str | os.PathLike[str], *, schema: Mapping[str, Any] | None = None,
              what: str = "YAML document", limit: str = "yaml_bytes") -> Any:
    """The YAML document of the file ``path``, read and checked as the module doc says."""
    p, text = _read(path, limit, what)
    doc = parse_yaml(text, source=printable(p), what=what)
    if schema is not None:
        validate(doc, schema, source=printable(p))
    return doc


# --- JSON ---------------------------------------------------------------------------------
class _Refused(ValueError):
    pass


def _json_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise _Refused(f"an integer of {len(text.lstrip('-')):,} digits (at most {MAX_INT_DIGITS})")
    return int(text)


def _json_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _Refused(f"the number {shortened(text, 40)} is not finite (beyond 1.8e308)")
    return value


def _json_constant(text: str) -> float:
    raise _Refused(f"{text} is not a number JSON allows (finite numbers only)")


def _json_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _Refused(f"the key {shortened(key, 60)} is given twice in one object")
            seen.add(key)
    return out


def parse_json(text: str, *, source: str, what: str = "JSON document", finite: bool = True) -> Any:
    """The JSON document ``text`` (``source`` names it in errors), checked as step 2 says;
    ``finite=False`` lets ``NaN`` and ``Infinity`` through (documents c2np writes with them,
    e.g. a store manifest's summary of orientation separations)."""
    try:
        doc = json.loads(text, parse_int=_json_int, parse_float=_json_float if finite else float,
                         parse_constant=_json_constant if finite else float, object_pairs_hook=_json_object)
    except _Refused as exc:
        raise C2NPInputError(f"{source}: {what} is not valid JSON: {exc}") from None
    except RecursionError:
        raise C2NPInputError(f"{source}: {what} is not valid JSON: nested deeper than {MAX_DEPTH} levels") from None
    except ValueError as exc:  # json.JSONDecodeError: says where, never echoes the text
        raise C2NPInputError(f"{source}: {what} is not valid JSON ({printable(exc)})") from None
    _check_depth(doc, source=source, what=what)
    return doc


def _check_depth(doc: Any, *, source: str, what: str) -> None:
    stack = [(doc, 0)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, (dict, list)):
            if depth >= MAX_DEPTH:
                raise C2NPInputError(f"{source}: {what} is not valid JSON: nested deeper than {MAX_DEPTH} levels")
            children = value.values() if isinstance(value, dict) else value
            stack.extend((c, depth + 1) for c in children if isinstance(c, (dict, list)))


# --- YAML ---------------------------------------------------------------------------------
def _yaml_loader() -> Any:
    """A safe YAML loader (libyaml's when installed) whose numbers and dates are checked."""
    import yaml
    from yaml.constructor import ConstructorError, SafeConstructor

    base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    class Loader(base):  # type: ignore[valid-type,misc]
        pass

    def construct_int(loader: Any, node: Any) -> int:
        text = str(loader.construct_scalar(node)).replace("_", "").lstrip("+-")
        if len(text) > MAX_INT_DIGITS:
            raise ConstructorError(None, None, f"an integer of {len(text):,} digits (at most {MAX_INT_DIGITS})",
                                   node.start_mark)
        return int(SafeConstructor.construct_yaml_int(loader, node))

    def construct_float(loader: Any, node: Any) -> float:
        value = float(SafeConstructor.construct_yaml_float(loader, node))
        if not math.isfinite(value):
            raise ConstructorError(None, None, f"{shortened(loader.construct_scalar(node), 40)} is not a "
                                   "finite number", node.start_mark)
        return value

    def construct_timestamp(loader: Any, node: Any) -> str:
        try:
            value = SafeConstructor.construct_yaml_timestamp(loader, node)
        except (ValueError, OverflowError):
            raise ConstructorError(None, None, f"{shortened(loader.construct_scalar(node), 40)} is not a "
                                   "valid date or time", node.start_mark) from None
        return value.isoformat() if isinstance(value, (_dt.date, _dt.datetime)) else str(value)

    Loader.add_constructor("tag:yaml.org,2002:int", construct_int)
    Loader.add_constructor("tag:yaml.org,2002:float", construct_float)
    Loader.add_constructor("tag:yaml.org,2002:timestamp", construct_timestamp)
    return Loader


def _yaml_events_checked(text: str, loader: Any) -> None:
    """First pass over the events (a flat stream, no recursion): aliases and depth."""
    import yaml

    depth = 0
    for event in yaml.parse(text, Loader=loader):
        if isinstance(event, yaml.AliasEvent):
            raise yaml.composer.ComposerError(None, None, "aliases (*name) are not allowed here",
                                              event.start_mark)
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                raise yaml.composer.ComposerError(None, None, f"nested deeper than {MAX_DEPTH} levels",
                                                  event.start_mark)
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


def load_yaml_text(text: str) -> Any:
    """The YAML document ``text`` checked as step 2 says (safe types only, no aliases,
    bounded depth, bounded integers, finite numbers, valid dates as ISO strings); a problem is
    a ``yaml.YAMLError`` with its line (:func:`parse_yaml` turns it into one message)."""
    import yaml

    loader = _yaml_loader()
    _yaml_events_checked(text, loader)
    try:
        return yaml.load(text, Loader=loader)  # noqa: S506  a SafeLoader subclass
    except RecursionError:
        raise yaml.YAMLError(f"nested deeper than {MAX_DEPTH} levels") from None


def parse_yaml(text: str, *, source: str, what: str = "YAML document") -> Any:
    """The YAML document ``text`` (one document; ``source`` names it in errors), read by
    :func:`load_yaml_text`; any problem is :class:`C2NPInputError` naming the line."""
    import yaml

    try:
        return load_yaml_text(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        place = f"line {mark.line + 1}: " if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise C2NPInputError(f"{source}: {place}not a valid {what} ({_cut(problem)})") from None


def _cut(text: object, limit: int = 200) -> str:
    return clipped(text, limit)


# --- schemas ------------------------------------------------------------------------------
#: The JSON Schema keywords :func:`validate` knows; any other keyword in a schema is a
#: programming error (ValueError), never silently ignored.
KEYWORDS = frozenset({"type", "enum", "const", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
                      "minLength", "maxLength", "pattern", "required", "properties", "additionalProperties",
                      "items", "minItems", "maxItems", "uniqueItems", "anyOf", "title", "description",
                      "default", "$schema"})

_TYPES: dict[str, tuple[str, Any]] = {
    "object": ("an object (key: value)", lambda v: isinstance(v, dict)),
    "array": ("a list", lambda v: isinstance(v, list)),
    "string": ("text", lambda v: isinstance(v, str)),
    "integer": ("an integer", lambda v: isinstance(v, int) and not isinstance(v, bool)),
    "number": ("a number", lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)),
    "boolean": ("true or false", lambda v: isinstance(v, bool)),
    "null": ("null", lambda v: v is None),
}


@functools.lru_cache(maxsize=256)
def _pattern(text: str) -> re.Pattern[str]:
    """A schema pattern; a final ``$`` means the end of the text (not before a last newline)."""
    return re.compile(text[:-1] + r"\Z" if text.endswith("$") and not text.endswith("\\$") else text)


def _field(path: tuple[Any, ...]) -> str:
    text = "".join(f"[{p}]" if isinstance(p, int) else f".{printable(p)}" for p in path).lstrip(".")
    return text or "(top level)"


def _check(value: Any, schema: Mapping[str, Any], path: tuple[Any, ...]) -> Iterator[tuple[str, str]]:
    unknown = set(schema) - KEYWORDS
    if unknown:
        raise ValueError(f"schema keyword(s) not supported by c2np.structured: {sorted(unknown)}")
    if "type" in schema:
        kinds = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        if not any(_TYPES[k][1](value) for k in kinds):
            yield _field(path), f"{shortened(value)} is not {' or '.join(_TYPES[k][0] for k in kinds)}"
            return
    if "const" in schema and value != schema["const"]:
        yield _field(path), f"{shortened(value)} must be {schema['const']!r}"
    if "enum" in schema and not any(value == e and type(value) is type(e) for e in schema["enum"]):
        yield _field(path), f"{shortened(value)} is not one of {', '.join(map(repr, schema['enum']))}"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            yield _field(path), f"{shortened(value)} is below the minimum {schema['minimum']}"
        if "maximum" in schema and value > schema["maximum"]:
            yield _field(path), f"{shortened(value)} is above the maximum {schema['maximum']}"
        if "exclusiveMinimum" in schema and value <= schema["exclusiveMinimum"]:
            yield _field(path), f"{shortened(value)} must be > {schema['exclusiveMinimum']}"
        if "exclusiveMaximum" in schema and value >= schema["exclusiveMaximum"]:
            yield _field(path), f"{shortened(value)} must be < {schema['exclusiveMaximum']}"
    if isinstance(value, str):
        if "minLength" in schema and len(value) < schema["minLength"]:
            yield _field(path), f"{shortened(value)} is shorter than {schema['minLength']} character(s)"
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            yield _field(path), f"{shortened(value)} is longer than {schema['maxLength']} characters"
        if "pattern" in schema and not _pattern(schema["pattern"]).search(value):
            yield _field(path), f"{shortened(value)} does not match {schema['pattern']}"
    if isinstance(value, dict):
        for key in schema.get("required", ()):
            if key not in value:
                yield _field(path), f"lacks the key {key!r}"
        props = schema.get("properties", {})
        extra = schema.get("additionalProperties", True)
        unexpected = []
        for key, sub in value.items():
            if key in props:
                yield from _check(sub, props[key], (*path, key))
            elif extra is False:
                unexpected.append(key)
            elif isinstance(extra, Mapping):
                yield from _check(sub, extra, (*path, key))
        if unexpected:
            shown = ", ".join(shortened(k, 40) for k in unexpected[:5])
            more = f" and {len(unexpected) - 5:,} more" if len(unexpected) > 5 else ""
            yield _field(path), f"unexpected key(s) {shown}{more}"
        if "anyOf" in schema:
            forms = schema["anyOf"]
            if not any(next(iter(_check(value, f, path)), None) is None for f in forms):
                needs = [f.get("required") for f in forms]
                if all(isinstance(n, list) and set(f) == {"required"} for n, f in zip(needs, forms)):
                    yield _field(path), "needs one of the keys " + ", ".join(" + ".join(n) for n in needs)
                else:
                    yield _field(path), "matches none of the allowed forms"
    if isinstance(value, list):
        if "minItems" in schema and len(value) < schema["minItems"]:
            yield _field(path), f"{len(value):,} item(s); at least {schema['minItems']} needed"
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            yield _field(path), f"{len(value):,} items; at most {schema['maxItems']} allowed"
        if schema.get("uniqueItems"):
            seen = [json.dumps(v, sort_keys=True) for v in value]
            if len(set(seen)) != len(seen):
                yield _field(path), "holds an item twice"
        if "items" in schema:
            for i, item in enumerate(value):
                yield from _check(item, schema["items"], (*path, i))


def problems(doc: Any, schema: Mapping[str, Any]) -> list[tuple[str, str]]:
    """``(field, problem)`` of every way ``doc`` breaks ``schema`` (at most
    :data:`MAX_PROBLEMS`, then one line counting the rest), in document order."""
    out: list[tuple[str, str]] = []
    extra = 0
    for item in _check(doc, schema, ()):
        if len(out) < MAX_PROBLEMS:
            out.append(item)
        else:
            extra += 1
            if extra > 10_000:
                break
    if extra:
        out.append(("(top level)", f"and {extra:,}{'+' if extra > 10_000 else ''} more problem(s)"))
    return out


def validate(doc: Any, schema: Mapping[str, Any], *, source: str) -> None:
    """Raise :class:`C2NPInputError` ``"{source}: {field}: {problem}"`` for the first way
    ``doc`` breaks ``schema``."""
    for place, message in _check(doc, schema, ()):
        raise C2NPInputError(f"{source}: {place}: {message}")
