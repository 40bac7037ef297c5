"""Publisher: what the intake needs of the connection a PUBLISH came in on.

An intake (broker/delivery/intake.py) routes or stores the message of the client's session
(`session`) and answers QoS 1/2 in arrival order through the client's `steps`: a PUBACK or
PUBREC (`send_publish_ack`, `send`; `Outlet`'s), or, at 3.x, a close (`kick`) where a
refusal has no answer; it stops reading a publisher whose answers pile up
(`pause_reading_if_behind`). `Client` (broker/connection/client.py) is the one Publisher;
naming this base class instead of it keeps the intake, and the hub that holds one, below
the connection code that hands them every PUBLISH.

A compiled base class rather than a `typing.Protocol`, for the reason `Outlet` gives: the
intake reads `session` and `steps` for every PUBLISH, and a field or a method no subclass
overrides is a native read or a direct call. It extends `Outlet` because `Client` does and
mypyc allows a native class one base only.
"""

from __future__ import annotations

from mqttq.broker.delivery.pending import OrderedSteps
from mqttq.broker.sessions.outlet import Outlet
from mqttq.broker.sessions.session import Session

__all__ = ["Publisher"]


class Publisher(Outlet):
    """One connection as the intake answers its PUBLISHes (see the module docstring)."""

    __slots__ = ("_steps", "client_id", "session")

    session: Session | None
    """The session the connection is attached to, once CONNECT was accepted."""
    client_id: str
    """The client id (the session's once attached; the CONNECT's before)."""
    _steps: OrderedSteps | None

    @property
    def steps(self) -> OrderedSteps:
        """The client's answers in arrival order; created by the first packet that needs
        one, so an idle connection holds none."""
        steps = self._steps
        if steps is None:
            steps = self._steps = OrderedSteps(self._steps_advanced)
        return steps

    def _steps_advanced(self) -> None:
        """Steps that waited ran (flow control on their count)."""
        raise NotImplementedError

    def pause_reading_if_behind(self) -> None:
        """Stop reading while too many answers wait for storage (a fast publisher)."""
        raise NotImplementedError
