/* The TNA program as it was before issue 59 (70 stateful ALUs): tests/test_tofino_fit.py shows the
 * check refusing it.  Its files are in tofino/; these forward to the shared files in p4src/. */
#include "../../../../p4src/headers.p4"
