// nvcc's exit-stub shape, bound by m.def, whose call names `exit` with an addend that lands on the PLT entry
// after exit's (another import, which returns): it runs on into a c10-named function that reads the
// environment. The screen takes the relocation's symbol for the callee: a region ending in a call to `exit`
// does not run on, and the stub counts as dead.
// expect: symbol-escape | getenv
asm(R"(
  .intel_syntax noprefix
  .section .text.stub_like,"ax",@progbits
  .globl stub_like
  .type stub_like, @function
stub_like:
  .byte 0xe8
  .reloc ., R_X86_64_PLT32, exit+12
  .long 0
  .size stub_like, .-stub_like
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
int entry(int n) { return n * 2; }
