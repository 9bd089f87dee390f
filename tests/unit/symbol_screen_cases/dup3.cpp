// File descriptors.
// expect: symbol-escape | dup3
#include <unistd.h>
#include <fcntl.h>
int f(int fd) { return dup3(fd, 1, O_CLOEXEC); }
