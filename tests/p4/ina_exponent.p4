/* ina.p4 as shipped (V = 64), for the STF vectors beside it. */
#include "../../p4src/ina.p4"
