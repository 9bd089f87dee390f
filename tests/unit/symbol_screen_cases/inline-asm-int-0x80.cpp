// The 32-bit system call gate.
// expect: machine-code | int 0x80
long f(long n) { long r; asm volatile("int $0x80" : "=a"(r) : "a"(n) : "memory"); return r; }
