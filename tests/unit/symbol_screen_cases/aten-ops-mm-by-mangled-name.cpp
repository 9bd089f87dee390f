// The same entry, declared extern "C" under its mangled name.
// expect: symbol-aten-compute | at::_ops::mm::call
extern "C" void* _ZN2at4_ops2mm4callERKNS_6TensorES4_(const void*, const void*);
void* f(const void* a) { return _ZN2at4_ops2mm4callERKNS_6TensorES4_(a, a); }
