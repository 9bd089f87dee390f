// A timer through libstdc++.
// expect: symbol-escape | std::chrono
#include <chrono>
long f() { return std::chrono::steady_clock::now().time_since_epoch().count(); }
