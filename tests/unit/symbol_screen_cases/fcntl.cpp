// File descriptors.
// expect: symbol-escape | fcntl
#include <fcntl.h>
int f(int fd) { return fcntl(fd, F_GETFL); }
