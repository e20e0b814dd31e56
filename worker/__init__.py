"""The worker library: quantize, packetize, and sum gradients through the switches."""
