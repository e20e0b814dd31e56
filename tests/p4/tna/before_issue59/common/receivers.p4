#include "../../../../../p4src/common/receivers.p4"
