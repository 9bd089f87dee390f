// NCCL is refused even when vendor libraries are allowed.
// expect: symbol-vendor | ncclCommCount
extern "C" int ncclCommCount(const void*, int*);
int f(const void* c) { int n; ncclCommCount(c, &n); return n; }
