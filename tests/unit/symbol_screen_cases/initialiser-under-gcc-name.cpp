// GCC's initialiser name passes; what it reaches does not.
// expect: global-constructor | getenv
#include <stdlib.h>
extern "C" void _GLOBAL__sub_I_fake() { getenv("X"); }
__attribute__((section(".init_array"), used)) static void (*entry)() = _GLOBAL__sub_I_fake;
