// The environment.
// expect: symbol-escape | getenv
#include <cstdlib>
const char* f() { return std::getenv("HOME"); }
