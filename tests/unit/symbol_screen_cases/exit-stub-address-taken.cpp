// nvcc's shape of a `__device__` function's host body, but its address is kept: it can be called, refused.
// expect: symbol-escape | exit
#include <cstdlib>
void stub_like(float) { int volatile ___ = 1; ::exit(___); }
void (*keep)(float) = stub_like;
