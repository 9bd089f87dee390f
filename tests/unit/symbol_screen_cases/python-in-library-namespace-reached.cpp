// pybind11-named code is tolerated only while nothing runs it.
// expect: symbol-python | PyRun_SimpleStringFlags
extern "C" int PyRun_SimpleStringFlags(const char*, void*);
namespace pybind11 { inline int run() { return PyRun_SimpleStringFlags("x", nullptr); } }
int f() { return pybind11::run(); }
