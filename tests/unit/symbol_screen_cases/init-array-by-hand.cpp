// A load-time table entry written by hand.
// expect: global-constructor | early
int counter;
static void early() { counter = 1; }
__attribute__((section(".init_array"), used)) static void (*entry)() = early;
