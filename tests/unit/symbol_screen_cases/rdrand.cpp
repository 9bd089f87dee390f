// Hardware randomness.
// expect: machine-code | rdrand
#include <immintrin.h>
unsigned f() { unsigned v = 0; _rdrand32_step(&v); return v; }
