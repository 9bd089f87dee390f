// Allocation and view operators, the CUDA runtime, libc and libm basics: all on the allowlist.
// expect: none
#include <cmath>
#include <cstdio>
#include <cstring>
namespace at {
class Tensor {};
namespace _ops {
struct empty_like { static Tensor call(const Tensor&); };
struct t { static Tensor call(const Tensor&); };
}  // namespace _ops
}  // namespace at
extern "C" int cudaGetDevice(int*);
at::Tensor f(const at::Tensor& a, char* d, const char* s, float x) {
  int dev = 0;
  cudaGetDevice(&dev);
  std::strcpy(d, s);
  std::printf("%d %f", dev, std::exp(x));
  return at::_ops::t::call(at::_ops::empty_like::call(a));
}
