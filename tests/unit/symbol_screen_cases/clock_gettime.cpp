// A timer.
// expect: symbol-escape | clock_gettime
#include <time.h>
long f() { timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_nsec; }
