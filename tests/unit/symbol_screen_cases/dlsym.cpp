// Looking code up at run time.
// expect: symbol-loader | dlsym
#include <dlfcn.h>
void* f() { return dlsym(RTLD_DEFAULT, "system"); }
