"""The built-in P4 target: a stand-in for BMv2 that executes P4-16 v1model source.

frontend/  preprocess, parse (lark), check: P4 source -> typed AST
executor/  compile the checked AST to Python and run packets with v1model semantics
p4info.py  the P4Info p4c would generate (same names and IDs)
cbuild.py  C built with the system compiler and cached (standard library only: the worker's C too)
stf.py     p4c-style STF packet tests
"""
