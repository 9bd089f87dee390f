// Library-named code is tolerated only while nothing runs it: called from the candidate, it is judged.
// expect: symbol-escape | reached from `f()`
extern "C" char* getenv(const char*);
namespace c10 {
inline __attribute__((noinline)) const char* home() { return getenv("HOME"); }
}  // namespace c10
const char* f() { return c10::home(); }
