"""The part of asyncio.Transport that `Client` uses, in memory: drives the broker's real
Client/Hub stack without sockets (tests/unit/test_client_writes.py,
benchmarks/broker_inproc.py)."""

from __future__ import annotations

from typing import Any


class MemoryTransport:
    """Keeps each write the broker makes, in order; with `keep=False` drops them (a long
    benchmark would otherwise hold every byte)."""

    def __init__(self, keep: bool = True) -> None:
        self.writes: list[bytes] = []
        self._keep = keep

    def write(self, data: bytes) -> None:
        if self._keep:
            self.writes.append(bytes(data))

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return default

    def set_write_buffer_limits(self, high: int, low: int) -> None:
        pass

    def is_closing(self) -> bool:
        return False

    def close(self) -> None:
        pass

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass
