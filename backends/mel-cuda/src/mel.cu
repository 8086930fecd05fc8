// melctl's fused mel kernel: clip samples -> distinct segments -> frames (centre
// padding, window) -> FFT -> power -> mel (non-zero filter spans) -> log -> output
// dtype, written in the final [clip][long][short][mel][frame] layout.
//
// Compiled by NVRTC at run time behind mel_common.cuh (what both kernels share: padding,
// launch bounds, the mel sums, the log / top_db epilogue, the stores), with the plan's
// constants as macros (`mel_cuda::codegen`), so every loop bound is known to the compiler.
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

__device__ __forceinline__ cplx cadd(cplx a, cplx b) { return {a.x + b.x, a.y + b.y}; }
__device__ __forceinline__ cplx csub(cplx a, cplx b) { return {a.x - b.x, a.y - b.y}; }
__device__ __forceinline__ cplx cmul(cplx a, cplx b) {
    return {fma(a.x, b.x, -a.y * b.y), fma(a.x, b.y, a.y * b.x)};
}
// multiply by -i
__device__ __forceinline__ cplx mul_negi(cplx a) { return {a.y, -a.x}; }

__device__ __forceinline__ void dft2(cplx &a, cplx &b) {
    cplx t = a;
    a = cadd(t, b);
    b = csub(t, b);
}

// In-place forward DFT of 4 values: out[q] = sum_r v[r] exp(-2 pi i r q / 4).
__device__ __forceinline__ void dft4(cplx &v0, cplx &v1, cplx &v2, cplx &v3) {
    cplx a0 = cadd(v0, v2), a1 = csub(v0, v2);
    cplx a2 = cadd(v1, v3), a3 = mul_negi(csub(v1, v3));
    v0 = cadd(a0, a2);
    v2 = csub(a0, a2);
    v1 = cadd(a1, a3);
    v3 = csub(a1, a3);
}

// In-place forward DFT of 8 values, outputs in natural order.
__device__ __forceinline__ void dft8(cplx *v) {
    const double h = 0.70710678118654752440;
    cplx a[4], b[4];
#pragma unroll
    for (int r = 0; r < 4; r++) {
        a[r] = cadd(v[r], v[r + 4]);
        b[r] = csub(v[r], v[r + 4]);
    }
    // b[r] *= exp(-2 pi i r / 8)
    b[1] = {h * (b[1].x + b[1].y), h * (b[1].y - b[1].x)};
    b[2] = mul_negi(b[2]);
    b[3] = {h * (b[3].y - b[3].x), -h * (b[3].x + b[3].y)};
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
// to buf; so one buffer suffices. stw is this stage's twiddle table, [r - 1][k] for
// r in 1..R, k in 0..NS: exp(-2 pi i r k / (NS R)); only its r = 1 row is read, the
// other powers are computed (in double: error ~1e-16, far below what matters here),
// which keeps shared-memory traffic, the kernel's limit, low.
template <int R, int NS, typename Load>
__device__ __forceinline__ void stockham_stage(cplx *buf, const cplx *stw, int lane, Load load) {
    constexpr int PER_LANE = (N_FFT / R + 31) / 32;
    // For NS <= 32 every butterfly of a lane has the same k: powers computed once.
    constexpr bool SHARED_K = NS <= 32;
    cplx wk[R];
    if constexpr (NS > 1 && SHARED_K) {
        wk[1] = stw[lane & (NS - 1)];
#pragma unroll
        for (int r = 2; r < R; r++) wk[r] = cmul(wk[r - 1], wk[1]);
    }
    cplx v[PER_LANE][R];
#pragma unroll
    for (int b = 0; b < PER_LANE; b++) {
        int j = lane + 32 * b;
        if (j < N_FFT / R) {
            cplx w1, wr;
            if constexpr (NS > 1 && !SHARED_K) {
                w1 = stw[j & (NS - 1)];
                wr = w1;
            }
#pragma unroll
            for (int r = 0; r < R; r++) {
                cplx x = load(j + r * (N_FFT / R));
                if constexpr (NS > 1) {
                    if (r > 0) {
                        if constexpr (SHARED_K) {
                            x = cmul(x, wk[r]);
                        } else {
                            x = cmul(x, wr);
                            if (r + 1 < R) wr = cmul(wr, w1);
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
__device__ __forceinline__ void fft_from(cplx *buf, const cplx *stw, int lane, First first) {
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
    cplx *tw = (cplx *)smem;                           // N_FFT
    cplx *bufs = tw + N_FFT;                           // WARPS * BUF_LEN
    double *win = (double *)(bufs + WARPS * BUF_LEN);  // N_FFT
    float *fw = (float *)(win + N_FFT);                // N_WEIGHTS, padded to 4
    float *mel = fw + ((N_WEIGHTS + 3) & ~3);          // SEGS * N_MELS * N_FRAMES

    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    for (int i = threadIdx.x; i < N_FFT; i += blockDim.x) {
        tw[i] = {twiddle[2 * i], twiddle[2 * i + 1]};
        win[i] = window[i];
    }
    for (int i = threadIdx.x; i < N_WEIGHTS; i += blockDim.x) fw[i] = f_w[i];
    __syncthreads();

    const BlockSegments blk = block_segments(n_clips);
    cplx *buf = bufs + warp * BUF_LEN;

#if POW2
    // Two real frames per complex transform.
    for (int pair = warp; 2 * pair < blk.frames; pair += WARPS) {
        const FramePair p = frame_pair(clips, offsets, blk.seg0, pair, blk.frames);
        // The windowed frames go straight from global memory into the first stage.
        auto input = [=](int n) -> cplx {
            double w = win[n];
            double a = w * padded_sample(p.sa, p.ta * HOP + n);
            double b = p.has_b ? w * padded_sample(p.sb, p.tb * HOP + n) : 0.0;
            return {a, b};
        };
        fft_from<1>(buf, tw, lane, input);
        // Separate the two spectra and take their power (double), rounded to float once.
        float pa[PER_LANE_K], pb[PER_LANE_K];
#pragma unroll
        for (int q = 0; q < PER_LANE_K; q++) {
            int k = lane + 32 * q;
            if (k < N_FREQS) {
                cplx z = buf[pad_idx(k)], y = buf[pad_idx((N_FFT - k) & (N_FFT - 1))];
                // A = (Z + conj(Y)) / 2, B = (Z - conj(Y)) / 2i
                double ar = z.x + y.x, ai = z.y - y.y;
                double br = z.y + y.y, bi = z.x - y.x;
                double a2 = 0.25 * (ar * ar + ai * ai), b2 = 0.25 * (br * br + bi * bi);
#if POWER == 1
                a2 = sqrt(a2);
                b2 = sqrt(b2);
#endif
                pa[q] = (float)a2;
                pb[q] = (float)b2;
            }
        }
        mel_sums_pair((float *)buf, pa, pb, p, f_start, f_len, f_off, fw, mel, lane);
    }
#else
    // Any n_fft: a direct real DFT per frame (slower; correct for every size).
    double *x = (double *)buf;            // N_FFT reals
    double *pw = x + N_FFT;               // N_FREQS reals (fits: 2 * N_FFT >= N_FFT + N_FREQS)
    for (int f = warp; f < blk.frames; f += WARPS) {
        const float *sg = segment_start(clips, offsets, blk.seg0 + f / N_FRAMES);
        const int t = f % N_FRAMES;
        for (int n = lane; n < N_FFT; n += 32) x[n] = win[n] * padded_sample(sg, t * HOP + n);
        __syncwarp();
        for (int k = lane; k < N_FREQS; k += 32) {
            double re = 0.0, im = 0.0;
            int idx = 0;
            for (int n = 0; n < N_FFT; n++) {
                cplx w = tw[idx];
                re = fma(x[n], w.x, re);
                im = fma(x[n], w.y, im);
                idx += k;
                if (idx >= N_FFT) idx -= N_FFT;
            }
            double p = re * re + im * im;
#if POWER == 1
            p = sqrt(p);
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
