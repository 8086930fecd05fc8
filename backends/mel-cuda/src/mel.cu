// melctl's fused mel kernel: clip samples -> distinct segments -> frames (centre
// padding, window) -> FFT -> power -> mel (non-zero filter spans) -> log -> output
// dtype, written in the final [clip][long][short][mel][frame] layout.
//
// Compiled by NVRTC at run time behind mel_common.cuh (what both kernels share: padding,
// launch bounds, the Stockham stages and the kernel body over the arithmetic, the mel
// sums, the log / top_db epilogue, the stores), with the plan's constants as macros
// (`mel_cuda::codegen`), so every loop bound is known to the compiler. This file has the
// arithmetic (struct F64) and the entry point.
//
// One block handles SEGS distinct segments (SEGS * N_FRAMES frames). Each warp owns
// one buffer of N_FFT complex values in shared memory and transforms frames two at a
// time (one real frame in the real part, the next in the imaginary part) with an
// in-place radix-8/4/2 Stockham FFT; the two spectra are then separated into two
// power spectra (stored as float) that the mel filters read. The transform and power
// run in double precision:
// a float FFT misses torchaudio's float64 reference by up to 0.03 dB on bins about
// 100 dB below the peak (docs/numerics.md, "Precision policy"). Power is rounded to float
// once computed (relative error 6e-8, far below the bound); mel sums, log and output are
// float.
//
// Required macros: mel_common.cuh's.

struct cplx { double x, y; };

// The transform's arithmetic in double: mel_common.cuh's A, for its Stockham stages and
// mel_body.
struct F64 {
    using C = cplx;
    using Tw = cplx;      // the stages' tables, or exp(-2 pi i k / N_FFT)
    using TwIn = double;  // the twiddle argument: (re, im) pairs
    using Win = double;
    using Sample = double;
    using Power = double;

    __device__ static __forceinline__ cplx add(cplx a, cplx b) { return {a.x + b.x, a.y + b.y}; }
    __device__ static __forceinline__ cplx sub(cplx a, cplx b) { return {a.x - b.x, a.y - b.y}; }
    __device__ static __forceinline__ cplx twiddle(cplx a, cplx b) {
        return {fma(a.x, b.x, -a.y * b.y), fma(a.x, b.y, a.y * b.x)};
    }
    // multiply by -i
    __device__ static __forceinline__ cplx mul_negi(const cplx &a) { return {a.y, -a.x}; }
    // multiply by exp(-i pi/4) = (1 - i)/sqrt(2) and by exp(-3i pi/4) = (-1 - i)/sqrt(2)
    __device__ static __forceinline__ cplx mul_w8(const cplx &a) {
        const double h = 0.70710678118654752440;
        return {h * (a.x + a.y), h * (a.y - a.x)};
    }
    __device__ static __forceinline__ cplx mul_w83(const cplx &a) {
        const double h = 0.70710678118654752440;
        return {h * (a.y - a.x), -h * (a.x + a.y)};
    }

    // A stage's twiddles: only its table's r = 1 row is read, the other powers are
    // computed (in double: error ~1e-16, far below what matters here), which keeps
    // shared-memory traffic, the kernel's limit, low.
    template <int R, int NS>
    __device__ static __forceinline__ void lane_twiddles(cplx (&w)[R], const cplx *stw, int k) {
        w[1] = stw[k];
#pragma unroll
        for (int r = 2; r < R; r++) w[r] = twiddle(w[r - 1], w[1]);
    }
    template <int R, int NS>
    struct Walk {
        cplx w1, wr;
        __device__ __forceinline__ void start(const cplx *stw, int k) {
            w1 = stw[k];
            wr = w1;
        }
        __device__ __forceinline__ cplx next(cplx x, int r) {
            x = twiddle(x, wr);
            if (r + 1 < R) wr = twiddle(wr, w1);
            return x;
        }
    };

    __device__ static __forceinline__ cplx table_twiddle(const double *t, int i) { return {t[2 * i], t[2 * i + 1]}; }
#if POW2
    // Input n of a frame pair's transform: frame a windowed in the real part, frame b in
    // the imaginary part (0 without a frame b).
    __device__ static __forceinline__ cplx frame_input(const double *win, const FramePair &p, int n) {
        double w = win[n];
        double a = w * padded_sample(p.sa, p.ta * HOP + n);
        double b = p.has_b ? w * padded_sample(p.sb, p.tb * HOP + n) : 0.0;
        return {a, b};
    }

    // A = (Z + conj(Y)) / 2, B = (Z - conj(Y)) / 2i; their power in double, rounded to
    // float once.
    __device__ static __forceinline__ void pair_powers(cplx z, cplx y, float &pa, float &pb) {
        double ar = z.x + y.x, ai = z.y - y.y;
        double br = z.y + y.y, bi = z.x - y.x;
        double a2 = 0.25 * (ar * ar + ai * ai), b2 = 0.25 * (br * br + bi * bi);
        a2 = spectrum_value(a2);
        b2 = spectrum_value(b2);
        pa = (float)a2;
        pb = (float)b2;
    }
#else
    // Sample n of frame t of the segment starting at seg, widened to double (exactly), times
    // the window.
    __device__ static __forceinline__ double frame_sample(const double *win, const float *seg, int t, int n) {
        return win[n] * padded_sample(seg, t * HOP + n);
    }
    // |X_k|^2 of the direct DFT of a frame's windowed samples x.
    __device__ static __forceinline__ double bin_power(const double *x, const cplx *tw, int k) {
        double re = 0.0, im = 0.0;
        int idx = 0;
        for (int n = 0; n < N_FFT; n++) {
            cplx w = tw[idx];
            re = fma(x[n], w.x, re);
            im = fma(x[n], w.y, im);
            idx += k;
            if (idx >= N_FFT) idx -= N_FFT;
        }
        return re * re + im * im;
    }
#endif
};

extern "C" __global__ void BOUNDS
mel_kernel(const float *__restrict__ clips, int n_clips, void *__restrict__ out,
           const double *__restrict__ window,      // [N_FFT]
           const double *__restrict__ twiddle,     // POW2: the stages' tables; else [N_FFT]: exp(-2 pi i k / N_FFT)
           const int *__restrict__ offsets,        // [N_DISTINCT] start of each distinct segment
           const int *__restrict__ map_start,      // [N_DISTINCT + 1] CSR into map_out
           const int *__restrict__ map_out,        // output segment indices of each distinct one
           int segs_per_clip,                      // output segments per clip
           const int *__restrict__ f_start,        // [N_MELS] first bin of each filter
           const int *__restrict__ f_len,          // [N_MELS] bins in each filter
           const int *__restrict__ f_off,          // [N_MELS] offset into f_w
           const float *__restrict__ f_w) {
    extern __shared__ double smem[];
    mel_body<F64>(smem, clips, n_clips, out, window, twiddle, offsets, map_start, map_out, segs_per_clip, f_start,
                  f_len, f_off, f_w);
}
