# Recon: what the task's process sees (fds, writable places, processes, env), raised as the message.
import os, stat
info = {}
info["uid"] = (os.getuid(), os.geteuid(), os.getgid(), os.getgroups())
info["cwd"] = os.getcwd()
fds = {}
for fd in os.listdir("/proc/self/fd"):
    try:
        fds[fd] = os.readlink(f"/proc/self/fd/{fd}")
    except OSError as e:
        fds[fd] = repr(e)
info["fds"] = fds
w = []
for root, dirs, files in os.walk("/", topdown=True):
    if root.startswith("/proc") or root.startswith("/sys"):
        dirs[:] = []
        continue
    if os.access(root, os.W_OK):
        w.append(root)
    if len(w) > 40:
        break
info["writable_dirs"] = w
info["procs"] = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())[:50]
info["shm"] = os.listdir("/dev/shm") if os.path.isdir("/dev/shm") else None
info["top"] = os.listdir("/")
info["tmp"] = os.listdir("/tmp") if os.path.isdir("/tmp") else None
try:
    info["statvfs_cwd"] = os.statvfs(".").f_bavail * os.statvfs(".").f_frsize
except OSError as e:
    info["statvfs_cwd"] = repr(e)
info.pop("fds"); info.pop("procs")
raise RuntimeError(f"RECON {info!r}")


class Model:
    pass


def get_inputs():
    return []


def get_init_inputs():
    return []
