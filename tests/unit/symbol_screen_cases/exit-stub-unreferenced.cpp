// nvcc's shape of a `__device__` function's host body, written by hand and referenced by nothing: dead code,
// as in every object with a non-inline `__device__` function (test_device_function_host_bodies_pass).
// expect: none
#include <cstdlib>
void stub_like(float) { int volatile ___ = 1; ::exit(___); }
int entry(int n) { return n * 2; }
