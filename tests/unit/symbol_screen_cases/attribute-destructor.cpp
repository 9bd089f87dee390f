// Unload-time code.
// expect: global-constructor | late
int counter;
__attribute__((destructor)) static void late() { counter = 2; }
