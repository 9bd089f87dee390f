// CUDA events time work outside the judge's view.
// expect: symbol-escape | cudaEventRecord
extern "C" int cudaEventRecord(void*, void*);
int f(void* e) { return cudaEventRecord(e, nullptr); }
