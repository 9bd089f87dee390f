// Files.
// expect: symbol-escape | fstat
#include <sys/stat.h>
long f(int fd) { struct stat st; fstat(fd, &st); return st.st_size; }
