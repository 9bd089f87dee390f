// Sockets.
// expect: symbol-escape | recv
#include <sys/socket.h>
long f(int s, char* b) { return recv(s, b, 1, 0); }
