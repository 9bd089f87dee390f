"""Read (as root) the red team's SysV segment 0x5EED1234: X's call count and last beat, B's memset counts."""
import ctypes, time
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
libc.shmat.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
i = libc.shmget(0x5EED1234, 4096, 0)
a = (ctypes.c_int64 * 16).from_address(libc.shmat(i, None, 0o10000))
print("X calls", a[0], "last beat", (time.monotonic_ns() - a[1]) / 1e9, "s ago; B memsets per thread", a[8], a[9], a[10])
