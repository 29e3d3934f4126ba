"""Type stubs for the native extension ``rocketstore._native`` (hand-written).

Checked against the compiled module by ``python -m mypy.stubtest rocketstore._native``.
Use the re-exports in :mod:`rocketstore` rather than this module directly.
"""

import os
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any, Literal, Self, TypeAlias, final

from typing_extensions import disjoint_base

from rocketstore.exceptions import (
    CorruptionError as CorruptionError,
)
from rocketstore.exceptions import (
    DiskFullError as DiskFullError,
)
from rocketstore.exceptions import (
    InvalidConfigError as InvalidConfigError,
)
from rocketstore.exceptions import (
    InvalidMessageError as InvalidMessageError,
)
from rocketstore.exceptions import (
    MessageStoreError as MessageStoreError,
)
from rocketstore.exceptions import (
    MessageTooLargeError as MessageTooLargeError,
)
from rocketstore.exceptions import (
    OffsetOutOfRangeError as OffsetOutOfRangeError,
)
from rocketstore.exceptions import (
    StoreClosedError as StoreClosedError,
)
from rocketstore.exceptions import (
    StoreForkedError as StoreForkedError,
)
from rocketstore.exceptions import (
    StoreIOError as StoreIOError,
)
from rocketstore.exceptions import (
    StoreLockedError as StoreLockedError,
)
from rocketstore.exceptions import (
    StorePoisonedError as StorePoisonedError,
)
from rocketstore.exceptions import (
    StoreReadOnlyError as StoreReadOnlyError,
)
from rocketstore.exceptions import (
    UnsupportedFormatError as UnsupportedFormatError,
)

__all__ = [
    "ConfigField",
    "CorruptionError",
    "DiskFullError",
    "InvalidConfigError",
    "InvalidMessageError",
    "Message",
    "MessageStore",
    "MessageStoreError",
    "MessageTooLargeError",
    "OffsetOutOfRangeError",
    "PutResult",
    "ScanIterator",
    "StoreClosedError",
    "StoreForkedError",
    "StoreIOError",
    "StoreLockedError",
    "StorePoisonedError",
    "StoreReadOnlyError",
    "UnsupportedFormatError",
    "__version__",
    "config_fields",
]

__version__: str

_ConfigValue: TypeAlias = int | bool | str

@final
class PutResult:
    """The result of putting one message."""

    @property
    def status(self) -> str:
        """RocketMQ's PutMessageStatus name, e.g. ``"PUT_OK"`` or ``"FLUSH_DISK_TIMEOUT"``."""
    @property
    def msg_id(self) -> str:
        """The offset message id (store host + commit log offset, uppercase hex)."""
    @property
    def commitlog_offset(self) -> int:
        """Absolute commit log offset of the record (-1 if it was not written)."""
    @property
    def queue_offset(self) -> int:
        """Offset in the (topic, queue_id) consume queue (-1 if not written)."""
    @property
    def wrote_bytes(self) -> int:
        """Size of the record in bytes."""
    @property
    def store_timestamp(self) -> int:
        """STORETIMESTAMP written into the record (epoch milliseconds)."""
    @property
    def ok(self) -> bool:
        """True if ``status == "PUT_OK"``."""
    def __eq__(self, other: object, /) -> bool: ...
    def __ne__(self, other: object, /) -> bool: ...
    def __hash__(self) -> int: ...

@final
class Message:
    """A message read back from the commit log (RocketMQ ``MessageExt``)."""

    @property
    def topic(self) -> str: ...
    @property
    def queue_id(self) -> int: ...
    @property
    def queue_offset(self) -> int: ...
    @property
    def commitlog_offset(self) -> int: ...
    @property
    def store_size(self) -> int: ...
    @property
    def body(self) -> bytes: ...
    @property
    def body_crc(self) -> int: ...
    @property
    def flag(self) -> int: ...
    @property
    def sys_flag(self) -> int: ...
    @property
    def tags(self) -> str | None: ...
    @property
    def keys(self) -> list[str]: ...
    @property
    def properties(self) -> dict[str, str]: ...
    @property
    def born_timestamp(self) -> int: ...
    @property
    def born_host(self) -> str: ...
    @property
    def store_timestamp(self) -> int: ...
    @property
    def store_host(self) -> str: ...
    @property
    def reconsume_times(self) -> int: ...
    @property
    def prepared_transaction_offset(self) -> int: ...
    @property
    def msg_id(self) -> str: ...
    @property
    def uniq_key(self) -> str | None: ...
    def __eq__(self, other: object, /) -> bool: ...
    def __hash__(self) -> int: ...

@final
class ScanIterator:
    """Iterator over the messages of a store (see ``MessageStore.scan``)."""

    def __iter__(self) -> ScanIterator: ...
    def __next__(self) -> Message: ...
    def next_batch(self, n: int) -> list[Message]:
        """Up to ``n`` next messages; an empty list once the scan is exhausted."""
    @property
    def offset(self) -> int | None:
        """The commit log offset of the next message, or None at the end."""

@final
class ConfigField:
    """One configuration field of ``MessageStore(path, **config)``."""

    @property
    def name(self) -> str: ...
    @property
    def rocketmq_name(self) -> str | None: ...
    @property
    def kind(self) -> str: ...
    @property
    def min(self) -> int | None: ...
    @property
    def max(self) -> int | None: ...
    @property
    def default(self) -> _ConfigValue: ...
    @property
    def doc(self) -> str: ...

@disjoint_base
class MessageStore:
    """A RocketMQ-compatible message store rooted at a directory."""

    def __new__(
        cls,
        path: str | os.PathLike[str],
        *,
        read_only: bool = False,
        **config: _ConfigValue,
    ) -> MessageStore: ...
    def put(
        self,
        topic: str,
        body: bytes | bytearray | memoryview,
        *,
        queue_id: int = 0,
        tags: str | None = None,
        keys: str | Sequence[str] | None = None,
        properties: Mapping[str, str] | None = None,
        flag: int = 0,
        born_timestamp: int | None = None,
        born_host: str | None = None,
        store_host: str | None = None,
    ) -> PutResult: ...
    def put_batch(self, messages: Sequence[Mapping[str, Any]]) -> list[PutResult]: ...
    def _put_columns(
        self, num_rows: int, columns: dict[str, tuple[Any, ...]]
    ) -> tuple[Any, ...]: ...
    def look_message_by_offset(self, commitlog_offset: int) -> Message: ...
    def scan(self, from_offset: int = 0, *, verify_crc: bool = False) -> ScanIterator: ...
    def min_commitlog_offset(self) -> int: ...
    def max_commitlog_offset(self) -> int: ...
    def flush(self) -> int: ...
    def cursors(self) -> dict[str, int]: ...
    def queue_offsets(self) -> list[tuple[str, int, int]]: ...
    def flush_count(self) -> int: ...
    def commitlog_files(self) -> list[str]: ...
    def close(self) -> None: ...
    @property
    def closed(self) -> bool: ...
    @property
    def path(self) -> str: ...
    @property
    def read_only(self) -> bool: ...
    @property
    def config(self) -> dict[str, _ConfigValue]: ...
    @property
    def recovery_report(self) -> dict[str, Any]: ...
    def __enter__(self) -> Self: ...
    def __exit__(
        self,
        exc_type: type[BaseException] | None = None,
        exc_value: BaseException | None = None,
        traceback: TracebackType | None = None,
    ) -> Literal[False]: ...
    def __reduce__(self) -> tuple[Any, ...]: ...

def config_fields() -> list[ConfigField]: ...
