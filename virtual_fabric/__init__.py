"""A deterministic virtual fabric: switches, controller and workers in one thread, in virtual time."""
