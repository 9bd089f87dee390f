// An entry point whose last call names `abort` with an addend that lands on the next PLT entry (another
// import, which returns): it runs on into a c10-named function that reads the environment. `abort` does not
// return, so the screen does not follow the fall-through.
// expect: symbol-escape | getenv
asm(R"(
  .intel_syntax noprefix
  .text
  .globl entry
  .type entry, @function
entry:
  .byte 0xe8
  .reloc ., R_X86_64_PLT32, abort+12
  .long 0
  .size entry, .-entry
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
