// The CUDA driver API.
// expect: symbol-escape | cuCtxGetCurrent
extern "C" int cuCtxGetCurrent(void**);
void* f() { void* c = nullptr; cuCtxGetCurrent(&c); return c; }
