// A namespace-scope object whose constructor calls something at load time.
// expect: global-constructor | puts
#include <cstdio>
struct Banner { Banner() { std::puts("loaded"); } } banner;
