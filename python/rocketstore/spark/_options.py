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
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from rocketstore.exceptions import InvalidConfigError

if TYPE_CHECKING:
    from rocketstore import ConfigField

__all__ = [
    "EARLIEST",
    "GEOMETRY_FIELDS",
    "LATEST",
    "OffsetSpec",
    "check_geometry",
    "geometry_options",
    "lookup_offset",
    "normalize",
    "option_spelling",
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


#: The store configuration fields that describe a store's files (commit log file size, consume
#: queue file size, index geometry): a store's own files say what they are, so the data
#: source takes them from the files and refuses an option that contradicts them.
GEOMETRY_FIELDS = (
    "mapped_file_size_commit_log",
    "mapped_file_size_consume_queue",
    "max_hash_slot_num",
    "max_index_num",
)


def option_spelling(options: Mapping[str, str], field: str) -> str:
    """The key of ``options`` that sets store configuration ``field``, as the user spelled it
    (``mappedFileSizeCommitLog``; a key Spark lowercased is given in RocketMQ's camelCase),
    else the field's RocketMQ name (else ``field``)."""
    index = _config_index()
    for key in options:
        f = index.get(normalize(key))
        if f is not None and f.name == field:
            camel = f.rocketmq_name if f.rocketmq_name and ":" not in f.rocketmq_name else None
            # Spark lowercases option names (``mappedfilesizecommitlog``): name those in
            # RocketMQ's camelCase, as the user most likely wrote them.
            if camel and key == key.lower() and "_" not in key and key != field:
                return camel
            return key
    for f in index.values():
        if f.name == field and f.rocketmq_name and ":" not in f.rocketmq_name:
            return f.rocketmq_name
    return field


def geometry_options(options: Mapping[str, str]) -> dict[str, str]:
    """The options of ``options`` that set a geometry field, as given (name -> value)."""
    index = _config_index()
    out: dict[str, str] = {}
    for key, value in options.items():
        f = index.get(normalize(key))
        if f is not None and f.name in GEOMETRY_FIELDS:
            out[key] = str(value)
    return out


def _store_geometry(store: str | os.PathLike[str], config: Mapping[str, Any]) -> dict[str, int]:
    from rocketstore._native import spark_store_geometry

    return dict(spark_store_geometry(os.fspath(store), **config))


def check_geometry(
    stores: Sequence[str | os.PathLike[str]],
    config: Mapping[str, Any],
    options: Mapping[str, str],
) -> dict[str, int]:
    """Checks the geometry options in ``config`` against the files of every store in ``stores``
    and returns the geometry of the last of them (``{}`` without stores).

    ``config`` is the store configuration :func:`split_options` parsed from ``options`` (the
    Spark options as given, for naming an option as the user spelled it). A geometry field
    ``config`` does not set is taken from each store's files when the store is opened; one it
    sets must be what the files hold, else :class:`~rocketstore.exceptions.InvalidConfigError`
    names the option (as spelled) and the value the files hold, on the driver, before any
    task runs. Without geometry options only the last store is read (to learn its geometry).
    """
    from rocketstore.exceptions import InvalidConfigError

    given = {k: config[k] for k in GEOMETRY_FIELDS if k in config}
    if not stores:
        return {}
    found: dict[str, int] = {}
    for store in stores if given else stores[-1:]:
        try:
            found = _store_geometry(store, given)
        except InvalidConfigError as e:
            key = str(getattr(e, "key", "") or "")
            if not given:
                return {}  # files of no single geometry (the open reports what is wrong)
            if key not in given:
                raise
            spelled = option_spelling(options, key)
            raise _config_error(
                spelled,
                f"option {spelled}={given[key]} contradicts the files of the store "
                f"{os.fspath(store)}: {_reason(e)}; leave the option out (the store's own "
                "value is used)",
            ) from None
        for key, value in given.items():
            have = found.get(key)
            want = value
            if key == "mapped_file_size_consume_queue" and isinstance(value, int):
                want = -(-value // 20) * 20  # whole 20-byte units, as the engine rounds it
            if have is not None and want != have:
                spelled = option_spelling(options, key)
                raise _config_error(
                    spelled,
                    f"option {spelled}={value} contradicts the files of the store "
                    f"{os.fspath(store)}: they hold {key}={have}; leave the option out (the "
                    "store's own value is used)",
                )
    return found


def _reason(e: Exception) -> str:
    """What the files hold, from the engine's message of a contradicting geometry value
    (``... contradicts the store's files: its commit log files are 1048576; leave ...``)."""
    m = re.search(r"contradicts? the store's files: (.*?)(?:; leave .*)?$", str(e), re.S)
    return m.group(1) if m else str(e)
