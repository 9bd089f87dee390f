// Code in an executable section not named .text*.
// expect: machine-code | .mycode
__attribute__((section(".mycode"))) int g(int x) { return x + 1; }
