"""Typed reads from untrusted YAML data, each failure naming the field's path."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Collection, Mapping
from typing import Any, TypeVar

import yaml

from .errors import RetryConfigError

T = TypeVar("T")


def join(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


def load_documents(text: str) -> list[Any]:
    """Every non-empty YAML document in ``text``; syntax errors name the line."""
    try:
        return [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark is not None else "YAML"
        raise RetryConfigError(where, f"not valid YAML: {getattr(exc, 'problem', exc)}") from None


def mapping(value: Any, path: str, allowed: Collection[str]) -> Mapping[str, Any]:
    """A mapping whose keys are all in ``allowed``; an unknown key suggests the closest one."""
    if not isinstance(value, Mapping):
        raise RetryConfigError(path, f"must be a mapping, not {type_name(value)}")
    for key in value:
        if not isinstance(key, str) or key not in allowed:
            close = difflib.get_close_matches(str(key), list(allowed), n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise RetryConfigError(join(path, str(key)), f"unknown field{hint}")
    return value


def string(value: Any, path: str) -> str:
    if not isinstance(value, str):
        raise RetryConfigError(path, f"must be a string, not {type_name(value)}")
    return value


def boolean(value: Any, path: str) -> bool:
    if not isinstance(value, bool):
        raise RetryConfigError(path, f"must be true or false, not {type_name(value)}")
    return value


def integer(value: object, path: str, *, minimum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise RetryConfigError(path, f"must be an integer, not {type_name(value)}")
    if minimum is not None and value < minimum:
        raise RetryConfigError(path, f"must be at least {minimum}, not {value}")
    return value


def number(value: Any, path: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise RetryConfigError(path, f"must be a number, not {type_name(value)}")
    return float(value)


def sequence(value: Any, path: str, item: Callable[[Any, str], T]) -> tuple[T, ...]:
    if not isinstance(value, list):
        raise RetryConfigError(path, f"must be a list, not {type_name(value)}")
    return tuple(item(v, join(path, i)) for i, v in enumerate(value))


def strings(value: Any, path: str) -> tuple[str, ...]:
    """A list of strings, also accepting one bare string (``onFailureCategory: oom``)."""
    if isinstance(value, str):
        return (value,)
    return sequence(value, path, string)


def converted(value: Any, path: str, convert: Callable[[Any], T]) -> T:
    """Apply a parser that raises ValueError, re-raising with the path."""
    try:
        return convert(value)
    except ValueError as exc:
        raise RetryConfigError(path, str(exc)) from None


def type_name(value: Any) -> str:
    if value is None:
        return "null"
    return {
        bool: "a boolean",
        int: "an integer",
        float: "a number",
        str: "a string",
        list: "a list",
        dict: "a mapping",
    }.get(type(value), type(value).__name__)
