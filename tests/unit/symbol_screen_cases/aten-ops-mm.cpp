// The dispatcher entry of a computing operator (what `at::mm` inlines to).
// expect: symbol-aten-compute | at::_ops::mm::call
namespace at { class Tensor {}; namespace _ops { struct mm { static Tensor call(const Tensor&, const Tensor&); }; } }
at::Tensor f(const at::Tensor& a) { return at::_ops::mm::call(a, a); }
