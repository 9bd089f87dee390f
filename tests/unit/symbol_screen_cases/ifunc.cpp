// An IFUNC resolver runs at load time.
// expect: global-constructor | IFUNC
extern "C" int impl() { return 1; }
extern "C" void* resolve() { return (void*)impl; }
extern "C" int pick() __attribute__((ifunc("resolve")));
