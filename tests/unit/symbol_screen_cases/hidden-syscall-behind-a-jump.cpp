// Executes 0f 05 (syscall) from inside `mov eax, 0x50f`.
// expect: machine-code | middle of an instruction
void f() { asm volatile("jmp 1f+1\n1: .byte 0xb8, 0x0f, 0x05, 0x00, 0x00"); }
