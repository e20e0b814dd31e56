"""P4Runtime for the built-in target: the gRPC service, its translation to the switch's
tables, and the device config our target takes in SetForwardingPipelineConfig."""
