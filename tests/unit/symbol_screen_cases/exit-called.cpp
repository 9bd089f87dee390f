// A host function that ends the process, called from the entry point: refused.
// expect: symbol-escape | exit
#include <cstdlib>
void bail(int code) { volatile int c = code; exit(c); }
int entry(int n) {
  if (n < 0) bail(1);
  return n * 2;
}
