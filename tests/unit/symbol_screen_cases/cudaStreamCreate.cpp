// A side stream.
// expect: symbol-escape | cudaStreamCreate
extern "C" int cudaStreamCreate(void**);
void* f() { void* s = nullptr; cudaStreamCreate(&s); return s; }
