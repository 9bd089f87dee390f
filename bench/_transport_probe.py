"""Diagnostic only: 80 MB CUDA tensors judge->runner->judge over pipe frames vs the shared arena."""
import multiprocessing as mp, sys, time, torch
from evalsvc.engine.codec import Arena, send, receive

DEV = sys.argv[1] if len(sys.argv) > 1 else "cuda"


def child(conn, arena):
    dev = torch.device(DEV)
    while True:
        m = receive(conn, map_location=dev, arena=arena)
        if m is None:
            return
        send(conn, {"ok": True, "output": m["x"] * 1}, arena)


def sync():
    if DEV == "cuda":
        torch.cuda.synchronize()


if __name__ == "__main__":
    ctx = mp.get_context("forkserver")
    dev = torch.device(DEV)
    x = torch.randn(20_000_000, device=dev)
    for name, arena in (("pipe frames", None), ("arena", Arena.create())):
        a, b = ctx.Pipe(); p = ctx.Process(target=child, args=(b, arena)); p.start()
        for i in range(5):
            sync(); t = time.perf_counter(); send(a, {"x": x}, arena, grow=True); r = receive(a, map_location=dev, arena=arena); sync(); dt = time.perf_counter() - t
            assert torch.equal(r["output"], x)
            print(f"{name}: 80 MB each way {dt*1e3:.0f} ms ({2*x.numel()*4/dt/1e9:.2f} GB/s)", flush=True)
        send(a, None); p.join()
