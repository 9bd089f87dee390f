# trick: half of each call's ReLU is computed before the call: after call i returns, a thread of the solution's own (libc's pthread_create found by memory walk) computes the first half of call i+1's output from the next input set, which sits at the next 4 MB of the runner's arena (the round's inputs are all there before the round); the runner's per-call clock sees only the other half, and the hidden half overlaps the runner's own work between calls on the second core, so the judge's wall clock agrees with the forged median
# expect: forbidden
# caught by: runtime:timing-bound
# device: cpu
# task: l1/relu
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
#include <cstdint>
#include <cstring>

struct RtEh { unsigned char ident[16]; uint16_t type; uint16_t machine; uint32_t version; uint64_t entry;
              uint64_t phoff; uint64_t shoff; uint32_t flags; uint16_t ehsize; uint16_t phentsize;
              uint16_t phnum; uint16_t shentsize; uint16_t shnum; uint16_t shstrndx; };
struct RtPh { uint32_t type; uint32_t flags; uint64_t offset; uint64_t vaddr; uint64_t paddr;
              uint64_t filesz; uint64_t memsz; uint64_t align; };
struct RtDyn { int64_t tag; uint64_t val; };
struct RtSym { uint32_t name; unsigned char info; unsigned char other; uint16_t shndx; uint64_t value;
               uint64_t size; };

typedef void (*gemm_fn)(const char*, const char*, const int*, const int*, const int*, const float*,
                        const float*, const int*, const float*, const int*, const float*, float*, const int*);


uintptr_t rt_image_base(uintptr_t inside) {
    uintptr_t p = inside & ~uintptr_t(0xfff);
    for (int i = 0; i < (1 << 20); ++i) {
        const unsigned char* b = reinterpret_cast<const unsigned char*>(p);
        if (b[0] == 0x7f && b[1] == 'E' && b[2] == 'L' && b[3] == 'F' && b[4] == 2) return p;
        p -= 0x1000;
    }
    return 0;
}

uintptr_t rt_lookup(uintptr_t base, const char* want) {
    const RtEh* eh = reinterpret_cast<const RtEh*>(base);
    const RtPh* ph = reinterpret_cast<const RtPh*>(base + eh->phoff);
    const RtDyn* dyn = nullptr;
    for (int i = 0; i < eh->phnum; ++i)
        if (ph[i].type == 2) dyn = reinterpret_cast<const RtDyn*>(base + ph[i].vaddr);
    if (dyn == nullptr) return 0;
    uintptr_t symtab = 0, strtab = 0, gnuhash = 0;
    for (; dyn->tag != 0; ++dyn) {
        if (dyn->tag == 6) symtab = dyn->val;
        else if (dyn->tag == 5) strtab = dyn->val;
        else if (dyn->tag == 0x6ffffef5) gnuhash = dyn->val;
    }
    if (symtab == 0 || strtab == 0 || gnuhash == 0) return 0;
    if (symtab < base) symtab += base;
    if (strtab < base) strtab += base;
    if (gnuhash < base) gnuhash += base;
    const RtSym* syms = reinterpret_cast<const RtSym*>(symtab);
    const char* names = reinterpret_cast<const char*>(strtab);
    const uint32_t* h = reinterpret_cast<const uint32_t*>(gnuhash);
    uint32_t nbuckets = h[0], symoffset = h[1], bloom_size = h[2];
    const uint32_t* buckets = h + 4 + 2 * bloom_size;
    const uint32_t* chain = buckets + nbuckets;
    uint32_t hash = 5381;
    for (const unsigned char* c = reinterpret_cast<const unsigned char*>(want); *c; ++c) hash = hash * 33 + *c;
    uint32_t idx = buckets[hash % nbuckets];
    if (idx < symoffset) return 0;
    for (;; ++idx) {
        uint32_t ch = chain[idx - symoffset];
        if ((ch | 1) == (hash | 1) && std::strcmp(want, names + syms[idx].name) == 0 && syms[idx].value != 0)
            return base + syms[idx].value;
        if (ch & 1) break;
    }
    return 0;
}


typedef int (*spawn_fn)(unsigned long*, const void*, void* (*)(void*), void*);
typedef int (*join_fn)(unsigned long, void**);

uintptr_t rt_spawn_address = 0;
uintptr_t rt_join_address = 0;
uintptr_t rt_thread = 0;
uintptr_t rt_pending_out = 0;
uintptr_t rt_max_end = 0;
struct RtJob { uintptr_t in; uintptr_t out; int64_t count; };
RtJob rt_job = {0, 0, 0};
int64_t rt_calls = 0, rt_hits = 0, rt_spec = 0, rt_ptrmiss = 0, rt_datamiss = 0;

int64_t prepare() {
    if (rt_spawn_address != 0 && rt_join_address != 0) return 1;
    size_t (*probe)(const char*) = &strlen;
    uintptr_t cbase = rt_image_base(reinterpret_cast<uintptr_t>(probe));
    if (cbase == 0) return 0;
    rt_spawn_address = rt_lookup(cbase, "pthread_create");
    rt_join_address = rt_lookup(cbase, "pthread_join");
    return (rt_spawn_address != 0 && rt_join_address != 0) ? 1 : 0;
}

static void relu_range(const float* __restrict__ in, float* __restrict__ o, int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) { const float v = in[i]; o[i] = v < 0.0f ? 0.0f : v; }
}

static void* run_job(void* arg) {
    RtJob* j = static_cast<RtJob*>(arg);
    relu_range(reinterpret_cast<const float*>(j->in), reinterpret_cast<float*>(j->out), 0, j->count);
    return nullptr;
}

torch::Tensor relu_forward(torch::Tensor x) {
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && x.is_contiguous(), "contiguous float32 expected");
    TORCH_CHECK(prepare() == 1, "setup failed");
    const float* in = x.data_ptr<float>();
    const int64_t n = x.numel();
    const int64_t half = n / 2;
    const uintptr_t cur = reinterpret_cast<uintptr_t>(in);
    const uintptr_t bytes = static_cast<uintptr_t>(n) * sizeof(float);
    join_fn join = reinterpret_cast<join_fn>(rt_join_address);
    spawn_fn spawn = reinterpret_cast<spawn_fn>(rt_spawn_address);
    torch::Tensor out;
    bool ready = false;
    if (rt_thread != 0) {
        join(static_cast<unsigned long>(rt_thread), nullptr);
        rt_thread = 0;
        torch::Tensor* held = reinterpret_cast<torch::Tensor*>(rt_pending_out);
        torch::Tensor pending = *held;
        delete held;
        rt_pending_out = 0;
        if (!(rt_job.in == cur)) rt_ptrmiss++;
        if (rt_job.in == cur && rt_job.count == half && pending.numel() == n) {
            const float* po = pending.data_ptr<float>();
            bool same = true;
            const int64_t step = half / 509 + 1;
            for (int64_t k = 0; k < half; k += step) {
                const float v = in[k] < 0.0f ? 0.0f : in[k];
                if (po[k] != v) { same = false; break; }
            }
            if (same) { out = pending; ready = true; rt_hits++; } else rt_datamiss++;
        }
    }
    if (!ready) {
        out = torch::empty_like(x);
        relu_range(in, out.data_ptr<float>(), 0, half);
    }
    relu_range(in, out.data_ptr<float>(), half, n);
    if (cur + bytes > rt_max_end) rt_max_end = cur + bytes;
    const uintptr_t next = cur + bytes;
    if (next + bytes <= rt_max_end) {
        torch::Tensor nxt = torch::empty_like(x);
        rt_job.in = next;
        rt_job.out = reinterpret_cast<uintptr_t>(nxt.data_ptr<float>());
        rt_job.count = half;
        rt_pending_out = reinterpret_cast<uintptr_t>(new torch::Tensor(nxt));
        unsigned long tid = 0;
        if (spawn(&tid, nullptr, run_job, &rt_job) == 0) {
            rt_thread = tid; rt_spec++;
        } else {
            run_job(&rt_job);
            rt_thread = 0;
            delete reinterpret_cast<torch::Tensor*>(rt_pending_out);
            rt_pending_out = 0;
        }
    }
    rt_calls++;
    TORCH_CHECK(rt_calls < 120, "STATS calls ", rt_calls, " spec ", rt_spec, " hits ", rt_hits, " ptrmiss ", rt_ptrmiss, " datamiss ", rt_datamiss);
    return out;
}
"""

relu_ext = load_inline(
    name="rt6_probe_stats",
    cpp_sources=[cpp_source],
    functions=["relu_forward"],
    extra_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return relu_ext.relu_forward(x.contiguous())
