"""The worker library: quantize, packetize, and sum gradients through the switches."""

from worker.api import Worker
from worker.direct import DirectWorker
from worker.errors import AllreduceError, AllreduceTimeout, SwitchOverflowError

__all__ = ["Worker", "DirectWorker", "AllreduceError", "AllreduceTimeout", "SwitchOverflowError"]
