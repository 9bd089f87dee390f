// The environment, read directly.
// expect: symbol-escape | environ
extern char** environ;
char* f() { return environ[0]; }
