// melctl's fused mel shader: clip samples -> distinct segments -> frames (centre
// padding, window) -> FFT -> power -> mel (non-zero filter spans) -> log -> output
// dtype, written in the final [clip][long][short][mel][frame] layout. The same
// pipeline as the CUDA kernels (backends/mel-cuda/src/mel_f32.cu).
//
// This file holds what both paths share: bindings, sample access, mel storage, log,
// top_db and the output conversion (`finish`); `dw.wgsl` (compensated arithmetic)
// follows it, then `fft.wgsl` (power-of-two N_FFT, one pass) or `dft.wgsl` (any N_FFT,
// two passes). Everything runs in f32: no 64-bit floats anywhere, so any adapter runs
// it. Accuracy is engineered instead (docs/numerics.md, "Compensated float32
// transforms"): the window and every twiddle come from f64 on the host as a rounded-once
// f32 plus the rest (never a power by repeated multiplication), and the transform
// carries each value with its rounding error (`dw.wgsl`), so it is as accurate as the
// f64 one was (a large DC offset needs no special care: its rounding errors are 2^-44
// of it, not 2^-24).
//
// The host prepends the plan's constants (codegen.rs `shader`): N_FFT, N_FREQS,
// HOP, N_FRAMES, PAIRS, SEG_LEN, PAD, REFLECT, POWER, N_MELS, CLIP_SAMPLES,
// N_DISTINCT, SEGS_PER_CLIP, VPS, LOG_KIND, LOG_MUL, AMIN, HAS_TOP_DB, TOP_DB,
// LN_OFFSET, OUT_KIND (0: f32 bits; 1: f16 pairs; 2: bf16 pairs), WG, MEL_IN_WG,
// MEL_WG_LEN, the section starts of `ints`: I_OFFSETS, I_MAP_START, I_MAP_OUT,
// I_F_FIRST, I_F_LEN, I_F_OFF; and each path's own (see its file).

struct Params {
    n_clips: u32,
    // Always 0: `hide` ORs it into values so that compilers cannot see through them.
    zero: u32,
    pad1: u32,
    pad2: u32,
}

@group(0) @binding(0) var<storage, read> clips: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;
// The window: (hi, lo, hi's split: 12-bit high part, the rest), computed in f64.
@group(0) @binding(2) var<storage, read> window: array<vec4<f32>>;
// Twiddles, two entries each: (re.hi, im.hi, re.lo, im.lo), then the split of the hi
// parts (re.hi12, im.hi12, re.rest, im.rest); hi is the f64 value rounded once, lo the
// rest. The FFT path's per-stage tables, or the DFT path's exp(-2 pi i k / N_FFT)
// for every k.
@group(0) @binding(3) var<storage, read> twiddle: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read> ints: array<u32>;
@group(0) @binding(5) var<storage, read> fw: array<f32>;
@group(0) @binding(6) var<uniform> params: Params;
// A segment's mel values when they do not fit in workgroup memory (MEL_IN_WG false):
// VPS values per distinct segment of the chunk.
@group(0) @binding(7) var<storage, read_write> scratch: array<f32>;

var<workgroup> mel: array<f32, MEL_WG_LEN>;
// The segment's peak for top_db, as an order-preserving integer key (`peak_key`).
var<workgroup> peak: atomic<i32>;

// Mel value i of this workgroup's segment `seg`, in workgroup memory or in `scratch`.
fn mel_load(seg: u32, i: u32) -> f32 {
    if (MEL_IN_WG) {
        return mel[i];
    }
    return scratch[seg * VPS + i];
}

fn mel_store(seg: u32, i: u32, v: f32) {
    if (MEL_IN_WG) {
        mel[i] = v;
    } else {
        scratch[seg * VPS + i] = v;
    }
}

// Makes every invocation's mel writes visible to the whole workgroup.
fn sync_mel() {
    if (!MEL_IN_WG) {
        storageBarrier();
    }
    workgroupBarrier();
}

// The sample at padded position p of the segment whose first sample is clips[base]
// (torch.stft centre padding: reflect or zeros).
fn padded(base: u32, p: u32) -> f32 {
    var s = i32(p) - i32(PAD);
    if (REFLECT) {
        s = abs(s);
        if (s >= i32(SEG_LEN)) {
            s = 2 * (i32(SEG_LEN) - 1) - s;
        }
    } else if (s < 0 || s >= i32(SEG_LEN)) {
        return 0.0;
    }
    return clips[base + u32(s)];
}

// Sample n (not windowed) of frame f of the segment at clips[base].
fn frame_raw(base: u32, f: u32, n: u32) -> f32 {
    return padded(base, f * HOP + n);
}

fn post_power(p: f32) -> f32 {
    if (POWER == 1u) {
        return sqrt(p);
    }
    return p;
}

fn log_scale(v: f32) -> f32 {
    if (LOG_KIND == 1u) {
        // 10·log10 (or 20·log10 for magnitudes) through log2: WGSL has no log10.
        return LOG_MUL * 0.30102999566398119521 * log2(max(v, AMIN));
    }
    if (LOG_KIND == 2u) {
        return log(v + LN_OFFSET);
    }
    return v;
}

// top_db: nothing below the segment's peak minus TOP_DB (dB scale only).
fn floored(y: f32, floor_db: f32) -> f32 {
    if (LOG_KIND == 1u && HAS_TOP_DB) {
        return max(y, floor_db);
    }
    return y;
}

// An integer that orders like the float `v` (`key_value` maps it back).
fn peak_key(v: f32) -> i32 {
    let i = bitcast<i32>(v);
    return select(i, i ^ 0x7fffffff, i < 0);
}

fn key_value(k: i32) -> f32 {
    return bitcast<f32>(select(k, k ^ 0x7fffffff, k < 0));
}

// f32 -> f16 bits, round to nearest even (subnormals, infinities, NaN kept).
fn to_f16(v: f32) -> u32 {
    let x = bitcast<u32>(v);
    let sign = (x >> 16u) & 0x8000u;
    let ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) {
        return sign | 0x7e00u | ((ax >> 13u) & 0x3ffu);
    }
    if (ax >= 0x477ff000u) {
        return sign | 0x7c00u; // rounds to infinity
    }
    if (ax >= 0x38800000u) {
        let r = ax - 0x38000000u; // exponent rebiased from 127 to 15
        return sign | ((r + 0x0fffu + ((r >> 13u) & 1u)) >> 13u);
    }
    if (ax <= 0x33000000u) {
        return sign; // at most 2^-25: rounds to zero
    }
    let e = ax >> 23u;
    let m = (ax & 0x7fffffu) | 0x800000u;
    let shift = 126u - e; // value in units of 2^-24 is m >> shift
    let q = m >> shift;
    let rem = m & ((1u << shift) - 1u);
    let half = 1u << (shift - 1u);
    var r = q;
    if (rem > half || (rem == half && (q & 1u) == 1u)) {
        r = q + 1u;
    }
    return sign | r;
}

// f32 -> bf16 bits, round to nearest even (NaN kept quiet).
fn to_bf16(v: f32) -> u32 {
    let u = bitcast<u32>(v);
    if ((u & 0x7fffffffu) > 0x7f800000u) {
        return ((u >> 16u) | 0x40u) & 0xffffu;
    }
    return ((u + 0x7fffu + ((u >> 16u) & 1u)) >> 16u) & 0xffffu;
}

fn to_half(v: f32) -> u32 {
    if (OUT_KIND == 1u) {
        return to_f16(v);
    }
    return to_bf16(v);
}

// The workgroup's index in a grid of at most 65535 columns.
fn group_index(wid: vec3<u32>) -> u32 {
    return wid.x + wid.y * 65535u;
}

// Sets the peak for `finish`; a workgroup barrier must follow before `finish`.
fn init_peak(lid: u32) {
    if (lid == 0u) {
        atomicStore(&peak, peak_key(-3.0e38f));
    }
}

// Log, top_db against the segment's own peak, conversion, and every output position
// the distinct segment `seg` fills. Every mel value of `seg` must be visible
// (`sync_mel`), and `init_peak` done before a barrier.
fn finish(seg: u32, lid: u32) {
    let clip = seg / N_DISTINCT;
    let d = seg % N_DISTINCT;
    // Log, and the peak of this segment for top_db.
    var local_peak = -3.0e38f;
    for (var i = lid; i < VPS; i += WG) {
        let y = log_scale(mel_load(seg, i));
        mel_store(seg, i, y);
        local_peak = max(local_peak, y);
    }
    var floor_db = 0.0f;
    if (LOG_KIND == 1u && HAS_TOP_DB) {
        atomicMax(&peak, peak_key(local_peak));
    }
    sync_mel();
    if (LOG_KIND == 1u && HAS_TOP_DB) {
        floor_db = key_value(atomicLoad(&peak)) - TOP_DB;
    }

    // Every output position this distinct segment fills.
    let j0 = ints[I_MAP_START + d];
    let j1 = ints[I_MAP_START + d + 1u];
    for (var j = j0; j < j1; j++) {
        let dst = (clip * SEGS_PER_CLIP + ints[I_MAP_OUT + j]) * VPS;
        if (OUT_KIND == 0u) {
            for (var i = lid; i < VPS; i += WG) {
                out[dst + i] = bitcast<u32>(floored(mel_load(seg, i), floor_db));
            }
        } else {
            // VPS is even here (the host checks): two values per word.
            for (var i = lid; i < VPS / 2u; i += WG) {
                let lo = to_half(floored(mel_load(seg, 2u * i), floor_db));
                let hi = to_half(floored(mel_load(seg, 2u * i + 1u), floor_db));
                out[dst / 2u + i] = lo | (hi << 16u);
            }
        }
    }
}
