// A host emulation of the parts of CUDA's thread model melctl's kernels use, so that
// mel.cu and mel_f32.cu run on a CPU, unchanged, for testing (mel_cuda::emu): every
// thread of a block is a fiber (ucontext), run one at a time until it reaches a
// synchronisation point; __syncwarp, __syncthreads and the shuffles are barriers over
// the warp or the block. Nothing here is fast; it is meant to be exact and strict:
// - a barrier that not every thread of its warp (or block) reaches is a deadlock,
//   reported with where each thread waits, never a hang;
// - the scheduling order is forward or reverse lane order (mel_cuda::emu runs both and
//   requires identical bytes), so a read that races with another thread's write
//   between two barriers shows up as different output;
// - shared memory starts as NaN in every block, and canaries after the block's shared
//   memory and after the output catch writes out of bounds.
// Arithmetic is the host's IEEE single and double precision with no contraction
// (compile with -ffp-contract=off): __fmaf_rn is fmaf, correctly rounded. It is not a
// GPU: it says nothing about speed, and a GPU's libm (log10f, sqrtf) may round
// differently in the last place.
#pragma once

#include <ucontext.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>

#define MEL_HOST_EMU 1
#define __device__
#define __global__
#define __forceinline__ inline
#define __restrict__ __restrict
#define __shared__
#define __launch_bounds__(...)
#define __align__(n) alignas(n)

using std::max;
using std::min;

struct alignas(8) float2 {
    float x, y;
};
struct alignas(16) float4 {
    float x, y, z, w;
};
inline float2 make_float2(float x, float y) { return {x, y}; }

struct emu_dim3 {
    unsigned x, y, z;
};

namespace emu {

enum State { READY, WAIT_WARP, WAIT_BLOCK, DONE };

struct Fiber {
    ucontext_t ctx;
    char *stack;
    int tid;
    State state;
    const char *where;  // what it waits in
};

struct Block {
    std::vector<Fiber> fibers;
    ucontext_t sched;
    int current = -1;
    unsigned block = 0, threads = 0;
    bool reverse = false;
    // Shuffle exchange: 32 lanes × 8 bytes per warp.
    std::vector<unsigned char> exchange;
    std::function<void()> body;
};

inline Block *B = nullptr;

inline Fiber &me() { return B->fibers[B->current]; }

inline void yield(State s, const char *where) {
    Fiber &f = me();
    f.state = s;
    f.where = where;
    swapcontext(&f.ctx, &B->sched);
}

inline void trampoline() {
    B->body();
    me().state = DONE;
    swapcontext(&me().ctx, &B->sched);
}

// Releases every barrier all of whose threads wait in it; returns whether any was.
inline bool release() {
    bool any = false;
    const int n = (int)B->fibers.size();
    for (int w = 0; w * 32 < n; w++) {
        int waiting = 0, lanes = std::min(32, n - w * 32);
        for (int l = 0; l < lanes; l++) waiting += B->fibers[w * 32 + l].state == WAIT_WARP;
        if (waiting == lanes) {
            for (int l = 0; l < lanes; l++) B->fibers[w * 32 + l].state = READY;
            any = true;
        }
    }
    int at_block = 0, done = 0;
    for (auto &f : B->fibers) {
        at_block += f.state == WAIT_BLOCK;
        done += f.state == DONE;
    }
    if (at_block > 0 && at_block + done == n) {
        for (auto &f : B->fibers)
            if (f.state == WAIT_BLOCK) f.state = READY;
        any = true;
    }
    return any;
}

[[noreturn]] inline void deadlock() {
    std::fprintf(stderr, "cuda_emu: deadlock in block %u:", B->block);
    for (auto &f : B->fibers)
        if (f.state != DONE) std::fprintf(stderr, " t%d:%s", f.tid, f.where ? f.where : "?");
    std::fprintf(stderr, "\n");
    std::exit(3);
}

inline std::vector<char *> &stacks() {
    static std::vector<char *> s;
    return s;
}

constexpr size_t STACK = 512 * 1024;

// Runs one block of `threads` threads, each executing `body`.
inline void run_block(unsigned block, unsigned threads, bool reverse, std::function<void()> body) {
    Block b;
    b.block = block;
    b.threads = threads;
    b.reverse = reverse;
    b.body = std::move(body);
    b.exchange.assign(((threads + 31) / 32) * 32 * 8, 0);
    b.fibers.resize(threads);
    while (stacks().size() < threads) stacks().push_back((char *)std::malloc(STACK));
    B = &b;
    for (unsigned t = 0; t < threads; t++) {
        Fiber &f = b.fibers[t];
        f.tid = (int)t;
        f.state = READY;
        f.where = nullptr;
        f.stack = stacks()[t];
        getcontext(&f.ctx);
        f.ctx.uc_stack.ss_sp = f.stack;
        f.ctx.uc_stack.ss_size = STACK;
        f.ctx.uc_link = nullptr;
        makecontext(&f.ctx, trampoline, 0);
    }
    for (;;) {
        bool ran = false, all_done = true;
        for (unsigned i = 0; i < threads; i++) {
            const int t = reverse ? (int)(threads - 1 - i) : (int)i;
            if (b.fibers[t].state == READY) {
                b.current = t;
                swapcontext(&b.sched, &b.fibers[t].ctx);
                ran = true;
            }
            if (b.fibers[t].state != DONE) all_done = false;
        }
        if (all_done) break;
        if (!release() && !ran) deadlock();
    }
    B = nullptr;
}

inline int lane() { return me().tid & 31; }
inline unsigned char *slot(int l) { return &B->exchange[((me().tid >> 5) * 32 + l) * 8]; }

}  // namespace emu

#define threadIdx (emu_dim3{(unsigned)emu::me().tid, 0u, 0u})
#define blockIdx (emu_dim3{emu::B->block, 0u, 0u})
#define blockDim (emu_dim3{emu::B->threads, 1u, 1u})

inline void __syncwarp(unsigned mask = 0xffffffffu) {
    if (mask != 0xffffffffu) {
        std::fprintf(stderr, "cuda_emu: __syncwarp with a partial mask\n");
        std::exit(3);
    }
    emu::yield(emu::WAIT_WARP, "__syncwarp");
}

inline void __syncthreads() { emu::yield(emu::WAIT_BLOCK, "__syncthreads"); }

template <typename T>
inline T emu_shfl(unsigned mask, T v, int src, const char *what) {
    static_assert(sizeof(T) <= 8, "shuffles move at most 8 bytes");
    if (mask != 0xffffffffu) {
        std::fprintf(stderr, "cuda_emu: %s with a partial mask\n", what);
        std::exit(3);
    }
    std::memcpy(emu::slot(emu::lane()), &v, sizeof(T));
    emu::yield(emu::WAIT_WARP, what);
    T r;
    std::memcpy(&r, emu::slot(src & 31), sizeof(T));
    emu::yield(emu::WAIT_WARP, what);
    return r;
}

template <typename T>
inline T __shfl_xor_sync(unsigned mask, T v, int lane_mask) {
    return emu_shfl(mask, v, emu::lane() ^ lane_mask, "__shfl_xor_sync");
}

template <typename T>
inline T __shfl_sync(unsigned mask, T v, int src) {
    return emu_shfl(mask, v, src, "__shfl_sync");
}

inline unsigned __float_as_uint(float f) {
    unsigned u;
    std::memcpy(&u, &f, 4);
    return u;
}
inline float __int_as_float(int i) {
    float f;
    std::memcpy(&f, &i, 4);
    return f;
}
inline float __uint_as_float(unsigned i) {
    float f;
    std::memcpy(&f, &i, 4);
    return f;
}

// Explicitly rounded single-precision operations: each one rounding, never contracted
// (the harness is compiled with -ffp-contract=off).
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fmaf_rn(float a, float b, float c) { return std::fmaf(a, b, c); }

// cvt.rn.f16.f32: round to nearest even, subnormals, infinities and NaN kept.
inline unsigned short emu_f32_to_f16(float v) {
    unsigned x = __float_as_uint(v);
    unsigned sign = (x >> 16) & 0x8000u;
    unsigned ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) return (unsigned short)(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
    if (ax >= 0x477ff000u) return (unsigned short)(sign | 0x7c00u);
    if (ax >= 0x38800000u) {
        unsigned r = ax - 0x38000000u;
        return (unsigned short)(sign | ((r + 0x0fffu + ((r >> 13) & 1u)) >> 13));
    }
    if (ax <= 0x33000000u) return (unsigned short)sign;
    unsigned e = ax >> 23;
    unsigned m = (ax & 0x7fffffu) | 0x800000u;
    unsigned shift = 126u - e;
    unsigned q = m >> shift;
    unsigned rem = m & ((1u << shift) - 1u);
    unsigned half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (q & 1u))) q++;
    return (unsigned short)(sign | q);
}
