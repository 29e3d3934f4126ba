"""Option parsing shared by the ``rocketstore`` Spark data source's reader, writer and stream.

Spark hands a data source its options as a case-insensitive mapping whose keys are lowercased,
so every name here is matched without regard to case. Store configuration keywords are
accepted in RocketMQ's camelCase (``mappedFileSizeCommitLog``) and in this package's
snake_case (``mapped_file_size_commit_log``): both normalize to the same lowercase name
without underscores.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from rocketstore.exceptions import InvalidConfigError

if TYPE_CHECKING:
    from rocketstore import ConfigField

__all__ = [
    "EARLIEST",
    "LATEST",
    "OffsetSpec",
    "lookup_offset",
    "normalize",
    "parse_bool",
    "parse_int",
    "parse_offsets",
    "split_options",
]

#: Kafka's sentinel values in ``startingOffsets``/``endingOffsets`` JSON.
EARLIEST = -2
LATEST = -1

#: Options Spark itself puts into the map (the path given to ``load``/``save``).
_SPARK_OPTIONS = frozenset({"path", "paths"})

#: ``{store: {topic: {queue_id: offset}}}``; the store key ``"*"`` applies to every store.
OffsetSpec = dict[str, dict[str, dict[int, int]]]


def is_root_setting(key: str) -> bool:
    """True for the options of a store root's file system (``fs.s3a.endpoint``, ...,
    ``spark.hadoop.fs.*``, ``cacheDir``, ``cacheMaxBytes``; see :mod:`rocketstore._remote`)."""
    from rocketstore._remote import split_settings

    return bool(split_settings({key: ""})[0])


def normalize(name: str) -> str:
    """The lookup form of an option name: lowercase, without ``_``, ``-`` and ``.``."""
    return name.lower().replace("_", "").replace("-", "").replace(".", "")


def _config_error(key: str, message: str, suggestions: Iterable[str] = ()) -> InvalidConfigError:
    err = InvalidConfigError(message)
    err.key = key
    err.suggestions = tuple(suggestions)
    return err


def parse_bool(key: str, value: str) -> bool:
    """``true``/``false`` (also ``1``/``0``, ``yes``/``no``), case-insensitive."""
    v = str(value).strip().lower()
    if v in {"true", "1", "yes", "on"}:
        return True
    if v in {"false", "0", "no", "off"}:
        return False
    raise _config_error(key, f"option {key!r} must be true or false, not {value!r}")


def parse_int(key: str, value: str, *, minimum: int | None = None) -> int:
    """A decimal integer (``_`` separators allowed), at least ``minimum`` if given."""
    try:
        n = int(str(value).strip())
    except ValueError:
        raise _config_error(key, f"option {key!r} must be an integer, not {value!r}") from None
    if minimum is not None and n < minimum:
        raise _config_error(key, f"option {key!r} must be at least {minimum}, not {n}")
    return n


def _config_index() -> dict[str, ConfigField]:
    """normalized name -> field, for every store configuration field (both spellings)."""
    from rocketstore import config_fields

    index: dict[str, ConfigField] = {}
    for field in config_fields():
        index[normalize(field.name)] = field
        if field.rocketmq_name and ":" not in field.rocketmq_name:
            index.setdefault(normalize(field.rocketmq_name), field)
    return index


def split_options(
    options: Mapping[str, str], known: Iterable[str], *, what: str
) -> tuple[dict[str, str], dict[str, int | bool | str]]:
    """Splits Spark options into the data source's own options and store configuration.

    ``known`` lists the data source's option names (any spelling; they are normalized).
    Returns ``(own, config)``: ``own`` maps each given own option's normalized name to its
    value, ``config`` maps store configuration keywords (snake_case) to typed values. Any
    other option raises :class:`~rocketstore.exceptions.InvalidConfigError` naming the
    closest known names, so a typo fails the job on the driver before a task runs.
    """
    known = list(known)
    own_names = {normalize(k) for k in known}
    index = _config_index()
    own: dict[str, str] = {}
    config: dict[str, int | bool | str] = {}
    for key, value in options.items():
        norm = normalize(key)
        if norm in _SPARK_OPTIONS:
            continue
        if is_root_setting(key):  # remote roots' settings (rocketstore._remote)
            continue
        if norm in own_names:
            own[norm] = value
            continue
        if norm in index:
            field = index[norm]
            if field.kind == "int":
                n = parse_int(key, value, minimum=field.min)
                if field.max is not None and n > field.max:
                    raise _config_error(key, f"option {key!r} must be at most {field.max}, not {n}")
                config[field.name] = n
            elif field.kind == "bool":
                config[field.name] = parse_bool(key, value)
            else:
                config[field.name] = str(value)
            continue
        # Matched in the normalized form, suggested as written: the own options as the data
        # source spells them, store settings in RocketMQ's camelCase (else snake_case).
        spelled = {normalize(k): k for k in known}
        for lookup, f in index.items():
            camel = f.rocketmq_name if f.rocketmq_name and ":" not in f.rocketmq_name else None
            spelled.setdefault(lookup, camel or f.name)
        candidates = sorted(spelled)
        close = [spelled[c] for c in difflib.get_close_matches(norm, candidates, n=3, cutoff=0.6)]
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise _config_error(
            key,
            f"unknown option {key!r} for the rocketstore {what}{hint} (options are the data "
            "source's own options and store configuration keywords, see "
            "rocketstore.config_fields())",
            close,
        )
    return own, config


def _offset_value(key: str, where: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _config_error(key, f"option {key!r}: the offset of {where} must be an integer")
    if value < EARLIEST:
        raise _config_error(
            key,
            f"option {key!r}: the offset of {where} is {value}; use -2 (earliest), "
            "-1 (latest) or a queue offset >= 0",
        )
    return value


def _topic_map(key: str, where: str, value: Any) -> dict[str, dict[int, int]]:
    if not isinstance(value, dict):
        raise _config_error(key, f"option {key!r}: {where} must map topics to queue offsets")
    out: dict[str, dict[int, int]] = {}
    for topic, queues in value.items():
        if not isinstance(queues, dict):
            raise _config_error(
                key,
                f"option {key!r}: topic {topic!r} must map queue ids to offsets, "
                f'e.g. {{"{topic}": {{"0": 23}}}}',
            )
        parsed: dict[int, int] = {}
        for qid, off in queues.items():
            try:
                q = int(qid)
            except ValueError:
                raise _config_error(
                    key, f"option {key!r}: queue id {qid!r} of topic {topic!r} is not an integer"
                ) from None
            parsed[q] = _offset_value(key, f"{topic}/{q}", off)
        out[str(topic)] = parsed
    return out


def parse_offsets(key: str, value: str | None, default: int) -> tuple[int, OffsetSpec]:
    """Parses ``startingOffsets``/``endingOffsets``.

    Returns ``(default, spec)``: ``default`` is :data:`EARLIEST` or :data:`LATEST` for
    queues the spec does not name, ``spec`` the per-queue offsets. Accepted values:
    ``"earliest"``, ``"latest"``, Kafka's JSON ``{"topic": {"0": 23, "1": -2}}`` (applies
    to every store), or ``{"<store>": {"topic": {"0": 23}}}`` with stores named by their
    path relative to the load path (``"."`` when the path is itself a store).
    """
    if value is None:
        return default, {}
    text = str(value).strip()
    if text.lower() == "earliest":
        return EARLIEST, {}
    if text.lower() == "latest":
        return LATEST, {}
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise _config_error(
            key,
            f'option {key!r} must be "earliest", "latest" or JSON like '
            f'{{"TopicA": {{"0": 23}}}}: {e}',
        ) from None
    if not isinstance(data, dict):
        raise _config_error(key, f"option {key!r} must be a JSON object")
    # A store-qualified spec nests one level deeper: its topic maps hold dicts of dicts.
    qualified = bool(data) and all(
        isinstance(v, dict) and v and all(isinstance(q, dict) for q in v.values())
        for v in data.values()
    )
    if qualified:
        spec = {str(s): _topic_map(key, f"store {s!r}", v) for s, v in data.items()}
    else:
        spec = {"*": _topic_map(key, "the JSON object", data)}
    return default, spec


def lookup_offset(spec: OffsetSpec, default: int, store: str, topic: str, queue_id: int) -> int:
    """The offset the spec gives ``(store, topic, queue_id)``, else ``default``."""
    for key in (store, "*"):
        queues = spec.get(key, {}).get(topic)
        if queues is not None and queue_id in queues:
            return queues[queue_id]
    return default
