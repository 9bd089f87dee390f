// A system call in inline assembly.
// expect: machine-code | syscall
long f(long n) { long r; asm volatile("syscall" : "=a"(r) : "a"(n) : "rcx", "r11", "memory"); return r; }
