// Defined under Python's name: the call reaches the interpreter's.
// expect: symbol-python | PyRun_SimpleStringFlags
extern "C" int PyRun_SimpleStringFlags(const char*, void*) { return 0; }
int f() { return PyRun_SimpleStringFlags("import os", nullptr); }
