"""The v1model executor: compiles a checked program to Python functions and runs packets."""
