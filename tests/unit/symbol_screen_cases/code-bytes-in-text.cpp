// A machine-code byte array placed in .text and called.
// expect: machine-code | blob
__attribute__((section(".text"))) extern const unsigned char blob[] = {0x0f, 0x05, 0xc3};
using Fn = void (*)();
void f() { reinterpret_cast<Fn>(reinterpret_cast<const void*>(blob))(); }
