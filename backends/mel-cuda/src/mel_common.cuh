// What melctl's two CUDA kernels share, written once: mel.cu (the transform in f64) and
// mel_f32.cu (in compensated f32) each get this text in front of their own (the host
// prepends it: `mel_cuda::kernel`, as mel-wgpu prepends common.wgsl), so a fix here
// reaches both. Only the transform's arithmetic differs between them: its complex type
// and operations, the stages' twiddles, the table loads, the windowing, the separation
// of a frame pair's spectra and the direct DFT's bin; each kernel file has these as one
// struct (F64, DW) and its entry point. Everything else is here: the centre padding of
// a segment's samples, the launch bounds, where a block's segments and a warp's frames
// lie, the shared-memory index of the FFT buffer, the mel sums, the log and top_db
// epilogue, the f32 / f16 / bf16 stores (none of which runs in double precision), and,
// as templates over that struct, the radix-2/4/8 butterflies, the Stockham stages, the
// FFT's stage sequence and the kernel body (mel_body).
//
// Required macros (the plan's and the launch shape's constants, `mel_cuda::codegen`):
// N_FFT, POW2 (1 if N_FFT is a power of two), N_FREQS, HOP, N_FRAMES, SEG_LEN, PAD,
// REFLECT, POWER, N_MELS, N_WEIGHTS (non-zero filter weights), CLIP_SAMPLES,
// N_DISTINCT, LOG_KIND (0 none, 1 dB, 2 ln), LOG_MUL, AMIN, HAS_TOP_DB, TOP_DB,
// LN_OFFSET, OUT_KIND (0 f32, 1 f16, 2 bf16), SEGS, WARPS, MIN_BLOCKS (0: no register
// cap); mel_f32.cu also R2_HI, R2_LO.

typedef unsigned short u16;

#if MIN_BLOCKS > 0
#define BOUNDS __launch_bounds__(WARPS * 32, MIN_BLOCKS)
#else
#define BOUNDS __launch_bounds__(WARPS * 32)
#endif

// Shared-memory position of complex element i: one 16-byte pad after every 8 values,
// so the stride-8 writes of a radix-8 stage fall in distinct banks within each
// quarter warp (8 lanes move 16 bytes each per shared-memory wavefront).
__device__ __forceinline__ int pad_idx(int i) { return i + (i >> 3); }
constexpr int BUF_LEN = N_FFT + N_FFT / 8;

// The sample at padded position p of the segment starting at seg (torch.stft centre
// padding), as stored: f32 (mel.cu widens it to f64, exactly).
__device__ __forceinline__ float padded_sample(const float *seg, int p) {
    int s = p - PAD;
#if REFLECT
    s = s < 0 ? -s : s;
    s = s >= SEG_LEN ? 2 * (SEG_LEN - 1) - s : s;
    return seg[s];
#else
    return (s >= 0 && s < SEG_LEN) ? seg[s] : 0.0f;
#endif
}

// The first sample of distinct segment s of the batch (clip s / N_DISTINCT).
__device__ __forceinline__ const float *segment_start(const float *clips, const int *offsets, long s) {
    return clips + (s / N_DISTINCT) * (long)CLIP_SAMPLES + offsets[s % N_DISTINCT];
}

// The distinct segments of this block: seg0 .. seg0 + segs_here of the batch's
// n_clips * N_DISTINCT, and their frames.
struct BlockSegments {
    long seg0;
    int segs_here;
    int frames;
};

__device__ __forceinline__ BlockSegments block_segments(int n_clips) {
    const long total_segs = (long)n_clips * N_DISTINCT;
    const long seg0 = (long)blockIdx.x * SEGS;
    const int segs_here = (int)min((long)SEGS, total_segs - seg0);
    return {seg0, segs_here, segs_here * N_FRAMES};
}

#if POW2
// A warp's two real frames, fa and fb = fa + 1 of the block's frames, transformed as one
// complex FFT: the start of each one's segment and its frame within the segment. Without
// a frame b (fa the block's last frame), b repeats a and its results are not stored.
struct FramePair {
    int fa, fb;
    bool has_b;
    const float *sa, *sb;
    int ta, tb;
};

__device__ __forceinline__ FramePair frame_pair(const float *clips, const int *offsets, long seg0, int pair,
                                                int frames) {
    FramePair p;
    p.fa = 2 * pair;
    p.fb = 2 * pair + 1;
    p.has_b = p.fb < frames;
    const int b = p.has_b ? p.fb : p.fa;
    p.sa = segment_start(clips, offsets, seg0 + p.fa / N_FRAMES);
    p.ta = p.fa % N_FRAMES;
    p.sb = segment_start(clips, offsets, seg0 + b / N_FRAMES);
    p.tb = b % N_FRAMES;
    return p;
}

// Power-spectrum bins per lane: lane + 32 q for q in 0..PER_LANE_K.
constexpr int PER_LANE_K = (N_FREQS + 31) / 32;

// The power spectra of a frame pair (pa for frame a, pb for frame b, each lane's bins),
// once the warp has read the transform out of its buffer: stored as float over that
// buffer (pw[k] for frame a, pw[N_FREQS + k] for frame b), then the mel filters' sums
// of both frames into mel ([segment][mel][frame] of the block). fw holds the non-zero
// filter weights in shared memory.
__device__ __forceinline__ void mel_sums_pair(float *pw, const float (&pa)[PER_LANE_K], const float (&pb)[PER_LANE_K],
                                              const FramePair &p, const int *f_start, const int *f_len,
                                              const int *f_off, const float *fw, float *mel, int lane) {
    const int ga = p.fa / N_FRAMES, gb = p.fb / N_FRAMES;
    const int tfa = p.fa % N_FRAMES, tfb = p.fb % N_FRAMES;
    __syncwarp();
#pragma unroll
    for (int q = 0; q < PER_LANE_K; q++) {
        int k = lane + 32 * q;
        if (k < N_FREQS) {
            pw[k] = pa[q];
            pw[N_FREQS + k] = pb[q];
        }
    }
    __syncwarp();
    for (int m = lane; m < N_MELS; m += 32) {
        float acc_a = 0.0f, acc_b = 0.0f;
        const int k0 = f_start[m], len = f_len[m], off = f_off[m];
        for (int i = 0; i < len; i++) {
            float w = fw[off + i];
            acc_a = fmaf(w, pw[k0 + i], acc_a);
            acc_b = fmaf(w, pw[N_FREQS + k0 + i], acc_b);
        }
        mel[(ga * N_MELS + m) * N_FRAMES + tfa] = acc_a;
        if (p.has_b) mel[(gb * N_MELS + m) * N_FRAMES + tfb] = acc_b;
    }
    __syncwarp();
}
#else
// The mel filters' sums of frame f of the block from its power spectrum pw (P: double in
// mel.cu, float in mel_f32.cu; each bin rounded to float as it is read) into mel.
template <typename P>
__device__ __forceinline__ void mel_sums(const P *pw, int f, const int *f_start, const int *f_len, const int *f_off,
                                         const float *fw, float *mel, int lane) {
    const int t = f % N_FRAMES;
    const int g = f / N_FRAMES;
    for (int m = lane; m < N_MELS; m += 32) {
        float acc = 0.0f;
        const int k0 = f_start[m], len = f_len[m], off = f_off[m];
        for (int i = 0; i < len; i++) acc = fmaf(fw[off + i], (float)pw[k0 + i], acc);
        mel[(g * N_MELS + m) * N_FRAMES + t] = acc;
    }
    __syncwarp();
}
#endif

__device__ __forceinline__ float log_scale(float v) {
#if LOG_KIND == 1
    return LOG_MUL * log10f(fmaxf(v, AMIN));
#elif LOG_KIND == 2
    return logf(v + LN_OFFSET);
#else
    return v;
#endif
}

// f32 -> f16 bits, round to nearest even.
__device__ __forceinline__ u16 f16_bits(float v) {
#ifdef MEL_HOST_EMU
    return emu_f32_to_f16(v);
#else
    u16 h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(v));
    return h;
#endif
}

__device__ __forceinline__ void store(void *out, long i, float v) {
#if OUT_KIND == 0
    ((float *)out)[i] = v;
#elif OUT_KIND == 1
    ((u16 *)out)[i] = f16_bits(v);
#else
    unsigned int u = __float_as_uint(v);
    u16 h;
    if ((u & 0x7fffffffu) > 0x7f800000u) h = (u16)((u >> 16) | 0x40u);  // quiet NaN
    else h = (u16)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);             // round to nearest even
    ((u16 *)out)[i] = h;
#endif
}

// After the block's barrier, each warp takes a segment of mel: log, top_db against the
// segment's own peak, conversion to the output dtype, and a write to every output place
// of the segment (map_out[map_start[d]..map_start[d + 1]] of its distinct segment d).
__device__ __forceinline__ void finish_segments(float *mel, void *out, const int *map_start, const int *map_out,
                                                int segs_per_clip, const BlockSegments &blk, int warp, int lane) {
    constexpr int VPS = N_MELS * N_FRAMES;
    for (int g = warp; g < blk.segs_here; g += WARPS) {
        float *v = mel + g * VPS;
        float peak = __int_as_float(0xff800000);  // -inf
        for (int i = lane; i < VPS; i += 32) {
            float y = log_scale(v[i]);
            v[i] = y;
            peak = fmaxf(peak, y);
        }
#if LOG_KIND == 1 && HAS_TOP_DB
        for (int o = 16; o > 0; o >>= 1) peak = fmaxf(peak, __shfl_xor_sync(0xffffffffu, peak, o));
        const float floor_db = peak - (float)TOP_DB;
#endif
        __syncwarp();
        const long s = blk.seg0 + g;
        const long clip = s / N_DISTINCT;
        const int d = (int)(s % N_DISTINCT);
        for (int j = map_start[d]; j < map_start[d + 1]; j++) {
            const long base = (clip * segs_per_clip + map_out[j]) * (long)VPS;
            for (int i = lane; i < VPS; i += 32) {
                float y = v[i];
#if LOG_KIND == 1 && HAS_TOP_DB
                y = fmaxf(y, floor_db);
#endif
                store(out, base + i, y);
            }
        }
    }
}

// The transform and the kernel body, written once over the kernel's arithmetic A: mel.cu's
// F64 (double complex values, twiddle powers computed from each stage's first row) or
// mel_f32.cu's DW (double-word float values, every twiddle power read from its table).
// Every sum, product and rounding of the transform is A's; what is here is the structure
// around them (the butterflies' and stages' data movement, the frame loops, the
// shared-memory layout), so each kernel compiles to the PTX it did when it had its own
// copy of this text.
//
// A provides the types C (a complex value of the transform, 16 bytes), Tw (a twiddle in
// shared memory, 16 bytes), TwIn (an element of the twiddle argument), Win (a window
// value, 8 bytes) and, for the direct DFT, Sample (a windowed sample) and Power (a bin's
// power); and, as static members:
//   add(a, b), sub(a, b), mul_negi(a) = a·(-i), mul_w8(a) = a·exp(-i pi/4),
//     mul_w83(a) = a·exp(-3i pi/4), twiddle(a, w) = a·w: the butterflies' arithmetic;
//   lane_twiddles<R, NS>(w, stw, k): w[r] for r in 1..R, the twiddles of butterfly k of
//     a stage with table stw, for a lane all of whose butterflies have this k (NS <= 32);
//   Walk<R, NS>: the same along one butterfly's inputs (NS > 32): start(stw, k), then
//     next(x, r) = x·w^r for r = 1, 2, ... in turn;
//   table_twiddle(twiddle, i): entry i of the twiddle argument, as a Tw;
//   POW2: frame_input(win, pair, n): input n of a frame pair's transform (frame a
//     windowed in the real part, frame b in the imaginary part); pair_powers(z, y, pa, pb):
//     both frames' bin k, as float, from the transform's bins z = Z[k] and
//     y = Z[(N_FFT - k) mod N_FFT];
//   else: frame_sample(win, seg, t, n): sample n of frame t of the segment starting at
//     seg, windowed; bin_power(x, tw, k): |X_k|^2 from a frame's N_FFT windowed samples x
//     and the table tw of exp(-2 pi i k / N_FFT).

// A bin's power p2 = |X|^2 as the plan wants it: p2, or |X| for POWER 1 (double in mel.cu,
// float in mel_f32.cu).
__device__ __forceinline__ double spectrum_value(double p2) {
#if POWER == 1
    return sqrt(p2);
#else
    return p2;
#endif
}
__device__ __forceinline__ float spectrum_value(float p2) {
#if POWER == 1
    return sqrtf(p2);
#else
    return p2;
#endif
}

template <typename A, typename C>
__device__ __forceinline__ void dft2(C &a, C &b) {
    C t = a;
    a = A::add(t, b);
    b = A::sub(t, b);
}

// In-place forward DFT of 4 values: out[q] = sum_r v[r] exp(-2 pi i r q / 4).
template <typename A, typename C>
__device__ __forceinline__ void dft4(C &v0, C &v1, C &v2, C &v3) {
    C a0 = A::add(v0, v2), a1 = A::sub(v0, v2);
    C a2 = A::add(v1, v3), a3 = A::mul_negi(A::sub(v1, v3));
    v0 = A::add(a0, a2);
    v2 = A::sub(a0, a2);
    v1 = A::add(a1, a3);
    v3 = A::sub(a1, a3);
}

// In-place forward DFT of 8 values, outputs in natural order.
template <typename A, typename C>
__device__ __forceinline__ void dft8(C *v) {
    C a[4], b[4];
#pragma unroll
    for (int r = 0; r < 4; r++) {
        a[r] = A::add(v[r], v[r + 4]);
        b[r] = A::sub(v[r], v[r + 4]);
    }
    // b[r] *= exp(-2 pi i r / 8)
    b[1] = A::mul_w8(b[1]);
    b[2] = A::mul_negi(b[2]);
    b[3] = A::mul_w83(b[3]);
    dft4<A>(a[0], a[1], a[2], a[3]);
    dft4<A>(b[0], b[1], b[2], b[3]);
#pragma unroll
    for (int p = 0; p < 4; p++) {
        v[2 * p] = a[p];
        v[2 * p + 1] = b[p];
    }
}

// One in-place Stockham stage of radix R by one warp: every lane first gathers all of
// its butterflies' inputs (through `load`: shared memory, or for the first stage the
// windowed input straight from global memory), the warp syncs, then every lane writes
// to buf; so one buffer suffices. stw is this stage's twiddle table, [r - 1][k] for
// r in 1..R, k in 0..NS: exp(-2 pi i r k / (NS R)); A::lane_twiddles and A::Walk read
// it (mel.cu only its r = 1 row, computing the other powers; mel_f32.cu every power).
template <typename A, int R, int NS, typename Load>
__device__ __forceinline__ void stockham_stage(typename A::C *buf, const typename A::Tw *stw, int lane, Load load) {
    using C = typename A::C;
    constexpr int PER_LANE = (N_FFT / R + 31) / 32;
    // For NS <= 32 every butterfly of a lane has the same k: its twiddles are found once.
    constexpr bool SHARED_K = NS <= 32;
    typename A::Tw wk[R];
    if constexpr (NS > 1 && SHARED_K) A::template lane_twiddles<R, NS>(wk, stw, lane & (NS - 1));
    C v[PER_LANE][R];
#pragma unroll
    for (int b = 0; b < PER_LANE; b++) {
        int j = lane + 32 * b;
        if (j < N_FFT / R) {
            typename A::template Walk<R, NS> walk;
            if constexpr (NS > 1 && !SHARED_K) walk.start(stw, j & (NS - 1));
#pragma unroll
            for (int r = 0; r < R; r++) {
                C x = load(j + r * (N_FFT / R));
                if constexpr (NS > 1) {
                    if (r > 0) {
                        if constexpr (SHARED_K) {
                            x = A::twiddle(x, wk[r]);
                        } else {
                            x = walk.next(x, r);
                        }
                    }
                }
                v[b][r] = x;
            }
            if constexpr (R == 8) dft8<A>(v[b]);
            else if constexpr (R == 4) dft4<A>(v[b][0], v[b][1], v[b][2], v[b][3]);
            else dft2<A>(v[b][0], v[b][1]);
        }
    }
    __syncwarp();
#pragma unroll
    for (int b = 0; b < PER_LANE; b++) {
        int j = lane + 32 * b;
        if (j < N_FFT / R) {
            int k = j & (NS - 1);
            int idx = (j - k) * R + k;
#pragma unroll
            for (int r = 0; r < R; r++) buf[pad_idx(idx + r * NS)] = v[b][r];
        }
    }
    __syncwarp();
}

#if POW2
// Radix-8 stages, then one radix-4 or radix-2 stage for the remaining factor. The
// first stage (NS = 1) reads through `first`; later ones from buf.
template <typename A, int NS, typename First>
__device__ __forceinline__ void fft_from(typename A::C *buf, const typename A::Tw *stw, int lane, First first) {
    auto from_buf = [buf](int i) { return buf[pad_idx(i)]; };
    if constexpr (NS * 8 <= N_FFT) {
        if constexpr (NS == 1) stockham_stage<A, 8, NS>(buf, stw, lane, first);
        else stockham_stage<A, 8, NS>(buf, stw, lane, from_buf);
        fft_from<A, NS * 8>(buf, stw + 7 * NS, lane, first);
    } else if constexpr (NS * 4 <= N_FFT) {
        if constexpr (NS == 1) stockham_stage<A, 4, NS>(buf, stw, lane, first);
        else stockham_stage<A, 4, NS>(buf, stw, lane, from_buf);
    } else if constexpr (NS * 2 <= N_FFT) {
        if constexpr (NS == 1) stockham_stage<A, 2, NS>(buf, stw, lane, first);
        else stockham_stage<A, 2, NS>(buf, stw, lane, from_buf);
    }
}
#endif

// The whole kernel, for the arithmetic A: the entry points (mel_kernel, mel_kernel_f32)
// pass their arguments and their dynamic shared memory, smem, laid out as
//   tw    N_FFT twiddles (A::Tw)
//   bufs  WARPS * BUF_LEN complex values (A::C), one FFT buffer per warp
//   win   N_FFT window values (A::Win)
//   fw    N_WEIGHTS filter weights, padded to 4
//   mel   SEGS * N_MELS * N_FRAMES float
// (`Shape::shared_bytes` on the host: the same bytes for both kernels).
template <typename A>
__device__ __forceinline__ void mel_body(void *smem, const float *clips, int n_clips, void *out,
                                         const typename A::Win *window, const typename A::TwIn *twiddle,
                                         const int *offsets, const int *map_start, const int *map_out,
                                         int segs_per_clip, const int *f_start, const int *f_len, const int *f_off,
                                         const float *f_w) {
    using C = typename A::C;
    using Tw = typename A::Tw;
    using Win = typename A::Win;
    static_assert(sizeof(C) == 16 && sizeof(Tw) == 16 && sizeof(Win) == 8, "Shape::shared_bytes's layout");
    Tw *tw = (Tw *)smem;                           // N_FFT
    C *bufs = (C *)(tw + N_FFT);                   // WARPS * BUF_LEN
    Win *win = (Win *)(bufs + WARPS * BUF_LEN);    // N_FFT
    float *fw = (float *)(win + N_FFT);            // N_WEIGHTS, padded to 4
    float *mel = fw + ((N_WEIGHTS + 3) & ~3);      // SEGS * N_MELS * N_FRAMES

    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    for (int i = threadIdx.x; i < N_FFT; i += blockDim.x) {
        tw[i] = A::table_twiddle(twiddle, i);
        win[i] = window[i];
    }
    for (int i = threadIdx.x; i < N_WEIGHTS; i += blockDim.x) fw[i] = f_w[i];
    __syncthreads();

    const BlockSegments blk = block_segments(n_clips);
    C *buf = bufs + warp * BUF_LEN;

#if POW2
    // Two real frames per complex transform.
    for (int pair = warp; 2 * pair < blk.frames; pair += WARPS) {
        const FramePair p = frame_pair(clips, offsets, blk.seg0, pair, blk.frames);
        // The windowed frames go straight from global memory into the first stage.
        auto input = [=](int n) -> C { return A::frame_input(win, p, n); };
        fft_from<A, 1>(buf, tw, lane, input);
        // Separate the two spectra and take their power, each rounded to float once.
        float pa[PER_LANE_K], pb[PER_LANE_K];
#pragma unroll
        for (int q = 0; q < PER_LANE_K; q++) {
            int k = lane + 32 * q;
            if (k < N_FREQS) {
                const C z = buf[pad_idx(k)], y = buf[pad_idx((N_FFT - k) & (N_FFT - 1))];
                A::pair_powers(z, y, pa[q], pb[q]);
            }
        }
        mel_sums_pair((float *)buf, pa, pb, p, f_start, f_len, f_off, fw, mel, lane);
    }
#else
    // Any n_fft: a direct real DFT per frame (slower; correct for every size), its
    // windowed samples and power spectrum over the warp's FFT buffer.
    using Sample = typename A::Sample;
    using Power = typename A::Power;
    static_assert(sizeof(Sample) * N_FFT + sizeof(Power) * N_FREQS <= sizeof(C) * BUF_LEN, "fits the buffer");
    Sample *x = (Sample *)buf;         // N_FFT
    Power *pw = (Power *)(x + N_FFT);  // N_FREQS
    for (int f = warp; f < blk.frames; f += WARPS) {
        const float *sg = segment_start(clips, offsets, blk.seg0 + f / N_FRAMES);
        const int t = f % N_FRAMES;
        for (int n = lane; n < N_FFT; n += 32) x[n] = A::frame_sample(win, sg, t, n);
        __syncwarp();
        for (int k = lane; k < N_FREQS; k += 32) {
            pw[k] = spectrum_value(A::bin_power(x, tw, k));
        }
        __syncwarp();
        mel_sums(pw, f, f_start, f_len, f_off, fw, mel, lane);
    }
#endif
    __syncthreads();

    finish_segments(mel, out, map_start, map_out, segs_per_clip, blk, warp, lane);
}
