#include "../../../../../p4src/common/parse_wire.p4"
