#include "../../../../p4src/protocol.p4"
