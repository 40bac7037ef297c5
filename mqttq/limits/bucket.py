"""TokenBucket: a rate limit whose requests wait for a token, up to a bound, then are refused.

Pure logic: the caller passes `now` (seconds, any monotonic origin) to every call; nothing
here reads a clock, sleeps or does I/O.

The bucket holds up to `capacity` tokens and gains `rate` tokens per second. A request
takes one token. When none is left it may still be admitted *in debt*: the token is taken
now (the level goes below zero) and the caller proceeds once the level would have reached
one, `delay` seconds later. Debt makes later requests wait behind earlier ones, so waiters
are served in arrival order, and the proceed times of admitted requests never exceed
`rate * w + capacity` in any window of `w` seconds. A request that would have to wait
longer than its bound is refused and changes nothing.
"""

from __future__ import annotations

import math

__all__ = ["TokenBucket"]

_SHORT = 1e-9
"""Tokens a request may be short of and still count as having its token: float rounding
in the refill (a level of 0.9999999999998 where exactly 1 is due) must not refuse it."""
_ONE = 1.0 - _SHORT


def _check(rate: float, burst: float) -> None:
    if not (math.isfinite(rate) and rate >= 0.0):
        raise ValueError(f"rate must be a finite number >= 0, got {rate!r}")
    if not (math.isfinite(burst) and burst >= 0.0):
        raise ValueError(f"burst must be a finite number >= 0, got {burst!r}")


def _capacity(rate: float, burst: float) -> float:
    # With a positive rate a bucket smaller than one token could never admit anything.
    return max(burst, 1.0) if rate > 0.0 else burst


class TokenBucket:
    """A token bucket of `rate` tokens/s holding up to `capacity` tokens, full at creation.

    `capacity` is `max(burst, 1)` when `rate > 0` (something is always admissible) and
    `burst` when `rate == 0` (rate 0 with burst 0 refuses everything). `now` going
    backwards (two clocks read a moment apart) counts as no time passed: no token is ever
    created by it, and delays are measured from the latest time the bucket has seen.
    """

    __slots__ = ("_level", "_stamp", "burst", "capacity", "rate")

    rate: float
    """Tokens gained per second."""
    burst: float
    """The configured burst (capacity before the `max(burst, 1)` rule)."""
    capacity: float
    """The most tokens the bucket holds."""

    def __init__(self, rate: float, burst: float, now: float) -> None:
        _check(rate, burst)
        self.rate = float(rate)
        self.burst = float(burst)
        self.capacity = _capacity(self.rate, self.burst)
        self._level = self.capacity
        """Tokens at `_stamp`; negative = debt owed by admitted, still waiting requests."""
        self._stamp = now

    def reserve(self, now: float, max_wait: float) -> float | None:
        """Take one token for a request arriving at `now`.

        Returns 0.0 (admitted, proceed now), a delay `d > 0` (admitted; the token is
        already taken, proceed at `now + d`) or None (it would have to wait more than
        `max_wait` seconds: refused, nothing taken)."""
        level = self._level
        if now > self._stamp:
            # Refilling up to `now` takes nothing, so it is kept even when refused.
            level += (now - self._stamp) * self.rate
            if level > self.capacity:  # noqa: PLR1730 (cheaper than min() per PUBLISH)
                level = self.capacity
            self._level = level
            self._stamp = now
        if level >= _ONE:  # the common case: a token is there
            self._level = level - 1.0
            return 0.0
        rate = self.rate
        if rate <= 0.0:
            return None
        # Compared in tokens, with the same slack as above: short of one by more than the
        # wait brings in.
        short = 1.0 - level
        if short > max_wait * rate + _SHORT:
            return None
        self._level = level - 1.0
        wait = short / rate
        return wait if wait < max_wait else max_wait

    def refund(self, now: float) -> None:
        """Give back one token taken by the last `reserve` (a later check refused the
        request). The level never rises above `capacity`."""
        level = self._refill(now) + 1.0
        self._level = level if level < self.capacity else self.capacity

    def delay(self, now: float) -> float:
        """The wait a `reserve` at `now` would need, without taking anything
        (0.0 when a token is there; math.inf when none will ever come)."""
        level = self.level(now)
        if level >= _ONE:
            return 0.0
        if self.rate <= 0.0:
            return math.inf
        return (1.0 - level) / self.rate

    def level(self, now: float) -> float:
        """Tokens available at `now`, without taking any (negative while admitted
        requests still wait; `capacity` when full)."""
        elapsed = now - self._stamp
        if elapsed <= 0.0:
            return self._level
        return min(self._level + elapsed * self.rate, self.capacity)

    def set_rate(self, rate: float, burst: float, now: float) -> None:
        """Change rate and burst at `now`, effective at once. The tokens gained so far (at
        the old rate) or the debt owed are kept, capped to the new capacity: a lowered rate
        applies to the next request. A larger capacity adds its extra tokens at once, so a
        raised quota admits the next request even when the old one had emptied the bucket
        (the bound then holds with the new burst). Raises ValueError for a negative, NaN or
        infinite value (nothing changes)."""
        _check(rate, burst)
        level = self._refill(now)
        old_capacity = self.capacity
        self.rate = float(rate)
        self.burst = float(burst)
        self.capacity = _capacity(self.rate, self.burst)
        if self.capacity > old_capacity:
            level += self.capacity - old_capacity
        self._level = level if level < self.capacity else self.capacity

    def _refill(self, now: float) -> float:
        if now > self._stamp:
            self._level = self.level(now)
            self._stamp = now
        return self._level

    def __repr__(self) -> str:
        return (
            f"TokenBucket(rate={self.rate!r}, burst={self.burst!r}, "
            f"level={self._level!r} at {self._stamp!r})"
        )
