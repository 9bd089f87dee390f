// A thread.
// expect: symbol-escape | std::thread
#include <thread>
void f() { std::thread t([] {}); t.join(); }
