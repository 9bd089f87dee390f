// What torch/extension.h leaves in every object: pybind11's inline functions (weak, COMDAT) that call the
// Python C-API but that nothing in the candidate runs. Named like a library and unreached: tolerated.
// The same function called from the candidate's code is refused (python-in-library-namespace-reached).
// expect: none
extern "C" int PyRun_SimpleStringFlags(const char*, void*);
namespace pybind11 {
__attribute__((used)) inline int dead() { return PyRun_SimpleStringFlags("x", nullptr); }
}  // namespace pybind11
int kernel_entry(int x) { return 2 * x; }
