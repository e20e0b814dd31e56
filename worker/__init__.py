"""The worker library: quantize, packetize, and sum gradients through the switches."""

from worker.api import Worker
from worker.errors import AllreduceError, AllreduceTimeout, SwitchOverflowError

__all__ = ["Worker", "AllreduceError", "AllreduceTimeout", "SwitchOverflowError"]
