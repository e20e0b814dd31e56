/* values.p4: how many int32 values a packet of the TNA program carries.
 *
 * 64 lanes are what Tofino 1's stateful ALUs hold across ingress and egress (ina_tna.p4's
 * stage plan), so 64 is both the most and the default here, where protocol.p4 (and ina.p4)
 * default to 256.  The controller reads this file for the program's default.
 */
#ifndef INA_TNA_VALUES_P4
#define INA_TNA_VALUES_P4

#ifndef INA_VALUES
#define INA_VALUES 64
#endif
#include "../protocol.p4"

#if INA_VALUES != 64
#error "the TNA program handles INA_VALUES = 64 (32 value pairs per pass)"
#endif

#endif
