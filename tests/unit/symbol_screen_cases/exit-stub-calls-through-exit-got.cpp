// A bound function (m.def can name any of the candidate's functions) in nvcc's exit-stub shape, but its one
// call is through exit's GOT slot plus a caller-chosen offset: any libc function (getenv, system...).
// expect: symbol-escape | exit
asm(R"(
  .intel_syntax noprefix
  .section .text.stub_like,"ax",@progbits
  .globl stub_like
  .type stub_like, @function
stub_like:
  mov rax, qword ptr [rip + exit@GOTPCREL]
  add rax, rdi
  mov rdi, rsi
  call rax
  .size stub_like, .-stub_like
  .section .text.stub_like_ret,"ax",@progbits
  ret
  .att_syntax prefix
  .text
)");
int entry(int n) { return n * 2; }
