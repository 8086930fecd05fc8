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
// bounds, the Stockham stages and the kernel body over the arithmetic, the mel sums, the
// log / top_db epilogue, the stores) is written there once; this file has the arithmetic
// (struct DW) and the entry point.
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

// The transform's arithmetic in compensated f32: mel_common.cuh's A, for its Stockham
// stages and mel_body.
struct DW {
    using C = dwc;
    using Tw = float4;      // (re.hi, im.hi, re.lo, im.lo)
    using TwIn = float4;
    using Win = float2;     // (hi, lo)
    using Sample = float2;  // a windowed sample as a real double-word (value, error)
    using Power = float;

    __device__ static __forceinline__ dwc add(dwc a, dwc b) {
        dwc r;
        float t0, t1;
        two_sum(a.vr, b.vr, r.vr, t0);
        two_sum(a.vi, b.vi, r.vi, t1);
        r.er = t0 + (a.er + b.er);
        r.ei = t1 + (a.ei + b.ei);
        return r;
    }

    __device__ static __forceinline__ dwc neg(dwc a) { return {-a.vr, -a.vi, -a.er, -a.ei}; }
    __device__ static __forceinline__ dwc sub(dwc a, dwc b) { return add(a, neg(b)); }
    // a·(-i)
    __device__ static __forceinline__ dwc mul_negi(dwc a) { return {a.vi, -a.vr, a.ei, -a.er}; }

    // a times the twiddle w = (hr + lr) + i (hi + li): hi parts rounded once from f64, lo the rest.
    __device__ static __forceinline__ dwc twiddle(dwc a, float4 w) {
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
    __device__ static __forceinline__ dwc scale(dwc a, float h, float l) {
        float p1, q1, p2, q2;
        two_prod(a.vr, h, p1, q1);
        two_prod(a.vi, h, p2, q2);
        return {p1, p2, q1 + (a.er * h + a.vr * l), q2 + (a.ei * h + a.vi * l)};
    }

    // a·(1 - i)/sqrt(2) and a·(-1 - i)/sqrt(2): the radix-8 butterfly's inner twiddles.
    __device__ static __forceinline__ dwc mul_w8(dwc a) {
        dwc u;
        float t0, t1;
        two_sum(a.vr, a.vi, u.vr, t0);
        two_sum(a.vi, -a.vr, u.vi, t1);
        u.er = t0 + (a.er + a.ei);
        u.ei = t1 + (a.ei - a.er);
        return scale(u, R2_HI, R2_LO);
    }

    __device__ static __forceinline__ dwc mul_w83(dwc a) {
        dwc u;
        float t0, t1;
        two_sum(a.vi, -a.vr, u.vr, t0);
        two_sum(-a.vr, -a.vi, u.vi, t1);
        u.er = t0 + (a.ei - a.er);
        u.ei = t1 - (a.er + a.ei);
        return scale(u, R2_HI, R2_LO);
    }

    // A stage's twiddles: every power read from its table (hi + lo), none computed by
    // multiplication; for a lane whose butterflies share k, once per stage.
    template <int R, int NS>
    __device__ static __forceinline__ void lane_twiddles(float4 (&w)[R], const float4 *stw, int k) {
#pragma unroll
        for (int r = 1; r < R; r++) w[r] = stw[(r - 1) * NS + k];
    }
    template <int R, int NS>
    struct Walk {
        const float4 *stw;
        int k;
        __device__ __forceinline__ void start(const float4 *table, int kk) {
            stw = table;
            k = kk;
        }
        __device__ __forceinline__ dwc next(dwc x, int r) { return twiddle(x, stw[(r - 1) * NS + k]); }
    };

    __device__ static __forceinline__ float4 table_twiddle(const float4 *t, int i) { return t[i]; }

    // x times the window's hi + lo, exactly as a real double-word (value, error).
    __device__ static __forceinline__ float2 windowed(float x, float2 w) {
        float p, q;
        two_prod(x, w.x, p, q);
        return make_float2(p, q + x * w.y);
    }
#if POW2
    // Input n of a frame pair's transform: frame a windowed in the real part, frame b in
    // the imaginary part (0 without a frame b), exactly as double-words.
    __device__ static __forceinline__ dwc frame_input(const float2 *win, const FramePair &p, int n) {
        const float2 w = win[n];
        const float2 a = windowed(padded_sample(p.sa, p.ta * HOP + n), w);
        const float2 b = p.has_b ? windowed(padded_sample(p.sb, p.tb * HOP + n), w) : make_float2(0.0f, 0.0f);
        return {a.x, b.x, a.y, b.y};
    }

    // A = (Z + conj(Y)) / 2, B = (Z - conj(Y)) / 2i, separated with TwoSum and each rounded
    // to f32 once; their power in f32.
    __device__ static __forceinline__ void pair_powers(dwc z, dwc y, float &pa, float &pb) {
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
        a2 = spectrum_value(a2);
        b2 = spectrum_value(b2);
        pa = a2;
        pb = b2;
    }
#else
    // Sample n of frame t of the segment starting at seg, windowed, as a double-word.
    __device__ static __forceinline__ float2 frame_sample(const float2 *win, const float *seg, int t, int n) {
        return windowed(padded_sample(seg, t * HOP + n), win[n]);
    }

    // |X_k|^2 of the direct DFT of a frame's windowed samples x, each bin a compensated
    // dot product (Dot2: every product's and every addition's error gathered in a
    // correction term, the twiddles' lo parts included).
    __device__ static __forceinline__ float bin_power(const float2 *x, const float4 *tw, int k) {
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
        return re * re + im * im;
    }
#endif
};

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
    mel_body<DW>(smem4, clips, n_clips, out, window, twiddle, offsets, map_start, map_out, segs_per_clip, f_start,
                 f_len, f_off, f_w);
}
