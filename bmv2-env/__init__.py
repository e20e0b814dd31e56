# ruff: noqa: N999 -- the folder is bmv2-env (as the issue names it); pyproject installs it as `bmv2env`.
"""Mininet networks of P4 switches (the built-in target or simple_switch_grpc), started from topology files."""
