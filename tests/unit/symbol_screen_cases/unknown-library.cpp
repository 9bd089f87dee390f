// Anything not on the allowlist.
// expect: symbol-unknown | some_private_api
extern "C" int some_private_api(int);
int f() { return some_private_api(1); }
