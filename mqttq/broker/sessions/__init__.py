"""Sessions: session.py (a session's queue and outbound in-flight window), outlet.py and
host.py (what a session needs of its connection and of the hub), lifecycle.py (CONNECT,
takeover, DISCONNECT, shutdown), endings.py (expiry, wills, takeovers, gone nodes), will.py,
restore.py (sessions back from storage at start)."""

from __future__ import annotations
