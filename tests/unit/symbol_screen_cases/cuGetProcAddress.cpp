// The driver's entry-point lookup.
// expect: symbol-loader | cuGetProcAddress
extern "C" int cuGetProcAddress_v2(const char*, void**, int, unsigned long long, void*);
void* f() { void* p = nullptr; cuGetProcAddress_v2("cuLaunchKernel", &p, 12000, 0, nullptr); return p; }
