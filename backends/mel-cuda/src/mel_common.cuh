// What melctl's two CUDA kernels share, written once: mel.cu (the transform in f64) and
// mel_f32.cu (in compensated f32) each get this text in front of their own (the host
// prepends it: `mel_cuda::kernel`, as mel-wgpu prepends common.wgsl), so a fix here
// reaches both. Only the transform differs between them: its arithmetic, the table
// loads, the separation of a frame pair's spectra and the direct DFT. Everything around
// it is here: the centre padding of a segment's samples, the launch bounds, where a
// block's segments and a warp's frames lie, the shared-memory index of the FFT buffer,
// the mel sums, the log and top_db epilogue, and the f32 / f16 / bf16 stores. None of it
// runs in double precision.
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
