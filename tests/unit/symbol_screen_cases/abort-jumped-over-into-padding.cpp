// An entry point that jumps over its call to `abort` into the padding after it (the function's size ends at
// the call) and so runs on into a c10-named function that reads the environment: the screen reads the
// last instruction by the symbol's size, sees `call abort` and does not follow the fall-through.
// expect: symbol-escape | getenv
asm(R"(
  .intel_syntax noprefix
  .text
  .globl entry
  .type entry, @function
entry:
  jmp 1f
  call abort@PLT
  .size entry, .-entry
1:
  nop
  .type _ZN3c106detail5afterEv, @function
_ZN3c106detail5afterEv:
  lea rdi, [rip + .Lhome]
  jmp getenv@PLT
  .size _ZN3c106detail5afterEv, .-_ZN3c106detail5afterEv
  .section .rodata.home,"a",@progbits
.Lhome:
  .string "HOME"
  .att_syntax prefix
  .text
)");
