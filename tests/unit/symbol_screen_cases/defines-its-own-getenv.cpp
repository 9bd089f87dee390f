// Defined under libc's name: the dynamic linker binds the call to libc's getenv.
// expect: symbol-escape | getenv
extern "C" char* getenv(const char*) { return nullptr; }
const char* f() { return getenv("HOME"); }
