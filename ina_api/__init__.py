"""The controller service's wire API (``jobs.proto``, its generated code) and its client.

The bottom layer beside p4src: the controller serves it, the worker and the torch backend call
it, so neither imports the other to talk about jobs."""
