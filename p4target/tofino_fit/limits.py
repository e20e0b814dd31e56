"""Tofino 1's numbers the fit check counts against, each with where it is published.

p4c paths are in https://github.com/p4lang/p4c (the open-sourced bf-p4c, ``backends/tofino``).
"""

from __future__ import annotations

# Match-action stages per pipe: bf-p4c/device.h, TofinoDevice::getNumStages() returns 12.
# Ingress and egress are threads through the SAME stages: bf-asm/stage.h keeps one vector of
# stages for either gress, so every per-stage budget below is shared by the two gresses.
STAGES = 12

# Logical tables (logical ids) per stage: bf-p4c/specs/mau_spec.h, StageUse::MAX_LOGICAL_IDS = 16
# (bf-p4c/mau/table_summary.h, NUM_LOGICAL_TABLES_PER_STAGE = 16).
TABLES_PER_STAGE = 16
PIPE_TABLES = STAGES * TABLES_PER_STAGE  # 192

# Stateful (meter) ALUs per stage: bf-p4c/mau/resource_estimate.h, StageUseEstimate::MAX_METER_ALUS = 4.
# One register is one stateful ALU, so all its RegisterActions run in one stage.
SALUS_PER_STAGE = 4
PIPE_SALUS = STAGES * SALUS_PER_STAGE  # 48

# A stateful ALU's instruction memory holds 4 instructions: at most 4 RegisterActions per register
# (Intel's Tofino SALU: 4 stateful instructions per stateful table; bf-asm/stateful.cpp).
ACTIONS_PER_REGISTER = 4

# Register cell: one value of at most 32 bits, or a pair of two halves of at most 32 bits each and
# the same width, at most 64 bits (a SALU has one ALU pair per 32-bit half; Chipmunk's Tofino
# SALU description, and bf-asm/tofino/stateful.cpp's 'dual' mode).
CELL_HALF_BITS = 32
CELL_BITS = 64
CELL_FIELDS = 2

# RegisterAction body on Tofino 1 (Chipmunk's Tofino SALU: a condition is
# ``±phv ± register + constant <compare> 0``, 2 conditions on Tofino 1, 2 ALUs per 32-bit half,
# one output word).
SALU_CONDITIONS = 2
SALU_OPERAND_BITS = 32
SALU_UPDATES_PER_FIELD = 2
SALU_OPERANDS = 2
SALU_OUTPUTS = 1
# ... unless the register is one value (its high ALU pair idle) and the RegisterAction has no local
# the high ALUs hold: then bf-p4c computes the output word in the high ALUs, one value under each
# one's predicate (bf-p4c/mau/stateful_alu.cpp: outputAluHi(), generate_alu_a(); "Incompatible
# outputs" when two sources would both be output directly).
SALU_OUTPUTS_VIA_ALU_HI = 2
SALU_UPDATE_OPS = frozenset({"+", "-", "&", "|", "^", "|+|", "|-|"})

# PHV containers: bf-asm/tofino/phv.h: 64 x 32 + 96 x 16 + 64 x 8 bits (4,096) of normal
# containers, and tag-along (TPHV) 32 x 32 + 48 x 16 + 32 x 8 bits (2,048) the MAU cannot read
# or write (its mau_id() is -1 from FIRST_TPHV on).
PHV_NORMAL_BITS = 64 * 32 + 96 * 16 + 64 * 8
PHV_TAGALONG_BITS = 32 * 32 + 48 * 16 + 32 * 8
