// A library class's virtual method (like c10::cuda::impl::CUDAGuardImpl::record) called by the candidate:
// the call reaches it, so its import is judged although the class's vtable slots are not followed.
// expect: symbol-escape | cudaEventRecord
extern "C" int cudaEventRecord(void*, void*);
namespace c10 {
struct GuardImpl {
  virtual ~GuardImpl() = default;
  __attribute__((noinline)) virtual int record(void* event) { return cudaEventRecord(event, nullptr); }
};
}  // namespace c10
int f(void* event) {
  c10::GuardImpl impl;
  return impl.record(event);
}
