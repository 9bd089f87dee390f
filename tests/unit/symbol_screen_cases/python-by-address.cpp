// The Python C-API, taken by address into a global.
// expect: symbol-python | PyRun_SimpleStringFlags
extern "C" int PyRun_SimpleStringFlags(const char*, void*);
auto p = &PyRun_SimpleStringFlags;
