// A weak (non-COMDAT) definition is an entry point.
// expect: symbol-python | PyRun_SimpleStringFlags
extern "C" int PyRun_SimpleStringFlags(const char*, void*);
__attribute__((weak)) int entry() { return PyRun_SimpleStringFlags("x", nullptr); }
