"""Sans-I/O MQTT codec for 3.1, 3.1.1 and 5.0 (stdlib only).

Public surface (implemented in reader.py / writer.py):
- `decode_packet(view, protocol_level, max_packet_size) -> (packet, consumed)`; raises
  `Incomplete` when more bytes are needed, `ProtocolError` (with a ReasonCode) when invalid.
- `PacketReader(max_packet_size)`: `feed(data)`, `next_packet() -> Packet | None`,
  attribute `protocol_level` (set from the CONNECT it decodes, or by the caller).
- `encode_packet(packet, protocol_level) -> bytes`.
"""

from __future__ import annotations
