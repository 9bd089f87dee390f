// `select` is an allowed view; `select_backward` computes.
// expect: symbol-aten-compute | select_backward
namespace at { class Tensor {}; namespace _ops { struct select_backward { static Tensor call(const Tensor&); }; } }
at::Tensor f(const at::Tensor& a) { return at::_ops::select_backward::call(a); }
