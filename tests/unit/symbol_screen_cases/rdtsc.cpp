// The timestamp counter.
// expect: machine-code | rdtsc
#include <x86intrin.h>
unsigned long long f() { return __rdtsc(); }
