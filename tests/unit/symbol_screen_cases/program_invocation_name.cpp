// Process identity.
// expect: symbol-escape | program_invocation_name
#include <errno.h>
const char* f() { return program_invocation_name; }
