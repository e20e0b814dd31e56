"""What an allreduce raises instead of hanging or returning a wrong sum."""

from __future__ import annotations


class AllreduceError(RuntimeError):
    """The allreduce could not produce the exact switch-computed sum."""


class AllreduceTimeout(AllreduceError):
    """No progress for the configured timeout; ``missing`` lists the seq numbers without a result."""

    def __init__(self, message: str, missing: list[int], retransmissions: int) -> None:
        super().__init__(message)
        self.missing = missing
        self.retransmissions = retransmissions


class SwitchOverflowError(AllreduceError):
    """The switch flagged an int32 overflow: that chunk's sum wrapped."""
