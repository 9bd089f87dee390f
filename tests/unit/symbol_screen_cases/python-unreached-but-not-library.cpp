// Unreached code that calls Python must at least be a library's.
// expect: symbol-python | used by `hidden()`
extern "C" int PyRun_SimpleStringFlags(const char*, void*);
__attribute__((used)) static int hidden() { return PyRun_SimpleStringFlags("x", nullptr); }
