// melctl's fused mel kernel in float32: clip samples -> distinct segments -> frames
// (centre padding, window) -> FFT -> power -> mel (non-zero filter spans) -> log ->
// output dtype, written in the final [clip][long][short][mel][frame] layout. The
// structure of mel.cu (the f64 kernel verified on an H100), with no double anywhere.
//
// A plain f32 FFT misses torchaudio's float64 reference by up to 0.019 dB on bins 100 dB
// below the peak (docs/numerics.md, "Compensated float32 transforms"). So the transform
// is compensated: every complex value is a double-word, v + e, its f32 rounding v and
// what the rounding left out e (struct dwc), about 2^-44 accurate. The error terms come
// from error-free transformations written with CUDA's explicitly rounded intrinsics,
// which the compiler never contracts into a multiply-add or reassociates: TwoSum
// (__fadd_rn, __fsub_rn) for each addition, and the exact product error
// fma(a, b, -fl(a·b)) (__fmul_rn, __fmaf_rn) for each product. The window and every
// twiddle come from f64 on the host as hi (rounded once) + lo (the rest); each stage
// reads every twiddle power from its table, none is computed by multiplication. The two
// frames of a pair are separated with TwoSum and rounded to f32 once; power, mel sums,
// log and output are plain f32. A double-word complex value takes 16 bytes, as a double
// complex did: shared memory layout and sizes are mel.cu's.
//
// Compiled behind mel_common.cuh, as mel.cu is: what both kernels share (padding, launch
// bounds, the mel sums, the log / top_db epilogue, the stores) is written there once.
//
// Required macros: mel_common.cuh's, and R2_HI, R2_LO (cos(pi/4) from f64 as hi rounded
// once + lo).

// A complex double-word: (vr + er) + i (vi + ei).
struct __align__(16) dwc {
    float vr, vi, er, ei;
};

// TwoSum (Knuth): s = fl(a + b) and s + t = a + b exactly.
__device__ __forceinline__ void two_sum(float a, float b, float &s, float &t) {
    s = __fadd_rn(a, b);
    const float bb = __fsub_rn(s, a);
    const float aa = __fsub_rn(s, bb);
    t = __fadd_rn(__fsub_rn(a, aa), __fsub_rn(b, bb));
}

// p = fl(a·b) and p + q = a·b exactly.
__device__ __forceinline__ void two_prod(float a, float b, float &p, float &q) {
    p = __fmul_rn(a, b);
    q = __fmaf_rn(a, b, -p);
}

__device__ __forceinline__ dwc dw_add(dwc a, dwc b) {
    dwc r;
    float t0, t1;
    two_sum(a.vr, b.vr, r.vr, t0);
    two_sum(a.vi, b.vi, r.vi, t1);
    r.er = t0 + (a.er + b.er);
    r.ei = t1 + (a.ei + b.ei);
    return r;
}

__device__ __forceinline__ dwc dw_neg(dwc a) { return {-a.vr, -a.vi, -a.er, -a.ei}; }
__device__ __forceinline__ dwc dw_sub(dwc a, dwc b) { return dw_add(a, dw_neg(b)); }
// a·(-i)
__device__ __forceinline__ dwc dw_negi(dwc a) { return {a.vi, -a.vr, a.ei, -a.er}; }

// a times the twiddle w = (hr + lr) + i (hi + li): hi parts rounded once from f64, lo the rest.
__device__ __forceinline__ dwc dw_cmul(dwc a, float4 w) {
    const float hr = w.x, hi = w.y, lr = w.z, li = w.w;
    float p1, q1, p2, q2, p3, q3, p4, q4;
    two_prod(a.vr, hr, p1, q1);
    two_prod(a.vi, hi, p2, q2);
    two_prod(a.vr, hi, p3, q3);
    two_prod(a.vi, hr, p4, q4);
    dwc r;
    float t0, t1;
    two_sum(p1, -p2, r.vr, t0);
    two_sum(p3, p4, r.vi, t1);
    r.er = t0 + (q1 - q2) + (a.er * hr - a.ei * hi) + (a.vr * lr - a.vi * li);
    r.ei = t1 + (q3 + q4) + (a.er * hi + a.ei * hr) + (a.vr * li + a.vi * lr);
    return r;
}

// Both components of a times the real constant h + l.
__device__ __forceinline__ dwc dw_scale(dwc a, float h, float l) {
    float p1, q1, p2, q2;
    two_prod(a.vr, h, p1, q1);
    two_prod(a.vi, h, p2, q2);
    return {p1, p2, q1 + (a.er * h + a.vr * l), q2 + (a.ei * h + a.vi * l)};
}

// a·(1 - i)/sqrt(2) and a·(-1 - i)/sqrt(2): the radix-8 butterfly's inner twiddles.
__device__ __forceinline__ dwc dw_w8(dwc a) {
    dwc u;
    float t0, t1;
    two_sum(a.vr, a.vi, u.vr, t0);
    two_sum(a.vi, -a.vr, u.vi, t1);
    u.er = t0 + (a.er + a.ei);
    u.ei = t1 + (a.ei - a.er);
    return dw_scale(u, R2_HI, R2_LO);
}

__device__ __forceinline__ dwc dw_w83(dwc a) {
    dwc u;
    float t0, t1;
    two_sum(a.vi, -a.vr, u.vr, t0);
    two_sum(-a.vr, -a.vi, u.vi, t1);
    u.er = t0 + (a.ei - a.er);
    u.ei = t1 - (a.er + a.ei);
    return dw_scale(u, R2_HI, R2_LO);
}

__device__ __forceinline__ void dft2(dwc &a, dwc &b) {
    dwc t = a;
    a = dw_add(t, b);
    b = dw_sub(t, b);
}

// In-place forward DFT of 4 values: out[q] = sum_r v[r] exp(-2 pi i r q / 4).
__device__ __forceinline__ void dft4(dwc &v0, dwc &v1, dwc &v2, dwc &v3) {
    dwc a0 = dw_add(v0, v2), a1 = dw_sub(v0, v2);
    dwc a2 = dw_add(v1, v3), a3 = dw_negi(dw_sub(v1, v3));
    v0 = dw_add(a0, a2);
    v2 = dw_sub(a0, a2);
    v1 = dw_add(a1, a3);
    v3 = dw_sub(a1, a3);
}

// In-place forward DFT of 8 values, outputs in natural order.
__device__ __forceinline__ void dft8(dwc *v) {
    dwc a[4], b[4];
#pragma unroll
    for (int r = 0; r < 4; r++) {
        a[r] = dw_add(v[r], v[r + 4]);
        b[r] = dw_sub(v[r], v[r + 4]);
    }
    // b[r] *= exp(-2 pi i r / 8)
    b[1] = dw_w8(b[1]);
    b[2] = dw_negi(b[2]);
    b[3] = dw_w83(b[3]);
    dft4(a[0], a[1], a[2], a[3]);
    dft4(b[0], b[1], b[2], b[3]);
#pragma unroll
    for (int p = 0; p < 4; p++) {
        v[2 * p] = a[p];
        v[2 * p + 1] = b[p];
    }
}

// One in-place Stockham stage of radix R by one warp: every lane first gathers all of
// its butterflies' inputs (through `load`: shared memory, or for the first stage the
// windowed input straight from global memory), the warp syncs, then every lane writes
// to buf; so one buffer suffices. stw is this stage's twiddle table, [r - 1][k] for r in
// 1..R, k in 0..NS: exp(-2 pi i r k / (NS R)) as hi + lo; every power is read from it.
template <int R, int NS, typename Load>
__device__ __forceinline__ void stockham_stage(dwc *buf, const float4 *stw, int lane, Load load) {
    constexpr int PER_LANE = (N_FFT / R + 31) / 32;
    // For NS <= 32 every butterfly of a lane has the same k: its twiddles are read once.
    constexpr bool SHARED_K = NS <= 32;
    float4 wk[R];
    if constexpr (NS > 1 && SHARED_K) {
#pragma unroll
        for (int r = 1; r < R; r++) wk[r] = stw[(r - 1) * NS + (lane & (NS - 1))];
    }
    dwc v[PER_LANE][R];
#pragma unroll
    for (int b = 0; b < PER_LANE; b++) {
        int j = lane + 32 * b;
        if (j < N_FFT / R) {
#pragma unroll
            for (int r = 0; r < R; r++) {
                dwc x = load(j + r * (N_FFT / R));
                if constexpr (NS > 1) {
                    if (r > 0) {
                        if constexpr (SHARED_K) {
                            x = dw_cmul(x, wk[r]);
                        } else {
                            x = dw_cmul(x, stw[(r - 1) * NS + (j & (NS - 1))]);
                        }
                    }
                }
                v[b][r] = x;
            }
            if constexpr (R == 8) dft8(v[b]);
            else if constexpr (R == 4) dft4(v[b][0], v[b][1], v[b][2], v[b][3]);
            else dft2(v[b][0], v[b][1]);
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
template <int NS, typename First>
__device__ __forceinline__ void fft_from(dwc *buf, const float4 *stw, int lane, First first) {
    auto from_buf = [buf](int i) { return buf[pad_idx(i)]; };
    if constexpr (NS * 8 <= N_FFT) {
        if constexpr (NS == 1) stockham_stage<8, NS>(buf, stw, lane, first);
        else stockham_stage<8, NS>(buf, stw, lane, from_buf);
        fft_from<NS * 8>(buf, stw + 7 * NS, lane, first);
    } else if constexpr (NS * 4 <= N_FFT) {
        if constexpr (NS == 1) stockham_stage<4, NS>(buf, stw, lane, first);
        else stockham_stage<4, NS>(buf, stw, lane, from_buf);
    } else if constexpr (NS * 2 <= N_FFT) {
        if constexpr (NS == 1) stockham_stage<2, NS>(buf, stw, lane, first);
        else stockham_stage<2, NS>(buf, stw, lane, from_buf);
    }
}
#endif

// x times the window's hi + lo, exactly as a real double-word (value, error).
__device__ __forceinline__ float2 windowed(float x, float2 w) {
    float p, q;
    two_prod(x, w.x, p, q);
    return make_float2(p, q + x * w.y);
}

extern "C" __global__ void BOUNDS
mel_kernel_f32(const float *__restrict__ clips, int n_clips, void *__restrict__ out,
               const float2 *__restrict__ window,     // [N_FFT] (hi, lo)
               const float4 *__restrict__ twiddle,    // [N_FFT] (re.hi, im.hi, re.lo, im.lo): POW2: the stages' tables; else exp(-2 pi i k / N_FFT)
               const int *__restrict__ offsets,       // [N_DISTINCT] start of each distinct segment
               const int *__restrict__ map_start,     // [N_DISTINCT + 1] CSR into map_out
               const int *__restrict__ map_out,       // output segment indices of each distinct one
               int segs_per_clip,                     // output segments per clip
               const int *__restrict__ f_start,       // [N_MELS] first bin of each filter
               const int *__restrict__ f_len,         // [N_MELS] bins in each filter
               const int *__restrict__ f_off,         // [N_MELS] offset into f_w
               const float *__restrict__ f_w) {
    extern __shared__ float4 smem4[];
    float4 *tw = smem4;                                // N_FFT
    dwc *bufs = (dwc *)(tw + N_FFT);                   // WARPS * BUF_LEN
    float2 *win = (float2 *)(bufs + WARPS * BUF_LEN);  // N_FFT
    float *fw = (float *)(win + N_FFT);                // N_WEIGHTS, padded to 4
    float *mel = fw + ((N_WEIGHTS + 3) & ~3);          // SEGS * N_MELS * N_FRAMES

    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    for (int i = threadIdx.x; i < N_FFT; i += blockDim.x) {
        tw[i] = twiddle[i];
        win[i] = window[i];
    }
    for (int i = threadIdx.x; i < N_WEIGHTS; i += blockDim.x) fw[i] = f_w[i];
    __syncthreads();

    const BlockSegments blk = block_segments(n_clips);
    dwc *buf = bufs + warp * BUF_LEN;

#if POW2
    // Two real frames per complex transform.
    for (int pair = warp; 2 * pair < blk.frames; pair += WARPS) {
        const FramePair p = frame_pair(clips, offsets, blk.seg0, pair, blk.frames);
        // The windowed frames go straight from global memory into the first stage,
        // exactly as double-words.
        auto input = [=](int n) -> dwc {
            const float2 w = win[n];
            const float2 a = windowed(padded_sample(p.sa, p.ta * HOP + n), w);
            const float2 b = p.has_b ? windowed(padded_sample(p.sb, p.tb * HOP + n), w) : make_float2(0.0f, 0.0f);
            return {a.x, b.x, a.y, b.y};
        };
        fft_from<1>(buf, tw, lane, input);
        // Separate the two spectra with TwoSum, rounding each to f32 once, and take their
        // power.
        float pa[PER_LANE_K], pb[PER_LANE_K];
#pragma unroll
        for (int q = 0; q < PER_LANE_K; q++) {
            int k = lane + 32 * q;
            if (k < N_FREQS) {
                const dwc z = buf[pad_idx(k)], y = buf[pad_idx((N_FFT - k) & (N_FFT - 1))];
                // A = (Z + conj(Y)) / 2, B = (Z - conj(Y)) / 2i
                float s, t;
                two_sum(z.vr, y.vr, s, t);
                const float ar = 0.5f * (s + (t + (z.er + y.er)));
                two_sum(z.vi, -y.vi, s, t);
                const float ai = 0.5f * (s + (t + (z.ei - y.ei)));
                two_sum(z.vi, y.vi, s, t);
                const float br = 0.5f * (s + (t + (z.ei + y.ei)));
                two_sum(y.vr, -z.vr, s, t);
                const float bi = 0.5f * (s + (t + (y.er - z.er)));
                float a2 = ar * ar + ai * ai, b2 = br * br + bi * bi;
#if POWER == 1
                a2 = sqrtf(a2);
                b2 = sqrtf(b2);
#endif
                pa[q] = a2;
                pb[q] = b2;
            }
        }
        mel_sums_pair((float *)buf, pa, pb, p, f_start, f_len, f_off, fw, mel, lane);
    }
#else
    // Any n_fft: a direct real DFT per frame (slower; correct for every size), each bin a
    // compensated dot product (Dot2: every product's and every addition's error gathered
    // in a correction term, the twiddles' lo parts included).
    float2 *x = (float2 *)buf;            // N_FFT windowed samples (value, error)
    float *pw = (float *)(x + N_FFT);     // N_FREQS (fits: 16 * BUF_LEN >= 8 * N_FFT + 4 * N_FREQS)
    for (int f = warp; f < blk.frames; f += WARPS) {
        const float *sg = segment_start(clips, offsets, blk.seg0 + f / N_FRAMES);
        const int t = f % N_FRAMES;
        for (int n = lane; n < N_FFT; n += 32) x[n] = windowed(padded_sample(sg, t * HOP + n), win[n]);
        __syncwarp();
        for (int k = lane; k < N_FREQS; k += 32) {
            float re = 0.0f, im = 0.0f, ere = 0.0f, eim = 0.0f;
            int idx = 0;
            for (int n = 0; n < N_FFT; n++) {
                const float4 w = tw[idx];
                const float2 v = x[n];
                float p, q, u;
                two_prod(v.x, w.x, p, q);
                two_sum(re, p, re, u);
                ere += u + q + (v.y * w.x + v.x * w.z);
                two_prod(v.x, w.y, p, q);
                two_sum(im, p, im, u);
                eim += u + q + (v.y * w.y + v.x * w.w);
                idx += k;
                if (idx >= N_FFT) idx -= N_FFT;
            }
            re += ere;
            im += eim;
            float p = re * re + im * im;
#if POWER == 1
            p = sqrtf(p);
#endif
            pw[k] = p;
        }
        __syncwarp();
        mel_sums(pw, f, f_start, f_len, f_off, fw, mel, lane);
    }
#endif
    __syncthreads();

    finish_segments(mel, out, map_start, map_out, segs_per_clip, blk, warp, lane);
}
