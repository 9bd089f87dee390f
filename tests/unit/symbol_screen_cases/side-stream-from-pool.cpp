// A side stream from c10's pool.
// expect: symbol-escape | getStreamFromPool
namespace c10 { namespace cuda { struct CUDAStream { void* p; }; CUDAStream getStreamFromPool(bool, signed char); } }
void* f() { return c10::cuda::getStreamFromPool(false, -1).p; }
