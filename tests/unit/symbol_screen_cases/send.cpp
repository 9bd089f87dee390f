// Sockets.
// expect: symbol-escape | send
#include <sys/socket.h>
long f(int s) { return send(s, "x", 1, 0); }
