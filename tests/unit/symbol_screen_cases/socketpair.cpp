// Sockets.
// expect: symbol-escape | socketpair
#include <sys/socket.h>
int f(int* sv) { return socketpair(AF_UNIX, SOCK_STREAM, 0, sv); }
