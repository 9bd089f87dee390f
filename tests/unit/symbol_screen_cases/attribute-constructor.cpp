// Load-time code under its own name.
// expect: global-constructor | early
int counter;
__attribute__((constructor)) static void early() { counter = 1; }
