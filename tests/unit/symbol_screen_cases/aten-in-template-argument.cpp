// An allowed namespace's template, instantiated with ATen compute.
// expect: symbol-aten-compute | at::native::mm
namespace at { namespace native { void mm(); } }
namespace c10 { template <void (*F)()> void run(); }
void f() { c10::run<&at::native::mm>(); }
