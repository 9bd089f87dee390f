// The Python C-API, called.
// expect: symbol-python | PyRun_SimpleStringFlags
extern "C" int PyRun_SimpleStringFlags(const char*, void*);
int f() { return PyRun_SimpleStringFlags("import os", nullptr); }
