// Any N_FFT: a direct real DFT per frame, in two passes (`mel_dft`, then
// `mel_finish`). Mel values always go through `scratch` (pass 2 reads them).
// Constants of this path: DFT_FRAMES, DFT_BLOCKS.

var<workgroup> frame_buf: array<f64, N_FFT>;
var<workgroup> pw: array<f32, N_FREQS>;

// Mel sums of the power spectrum in `pw` into mel[.., frame].
fn mel_frame(seg: u32, lid: u32, frame: u32) {
    for (var m = lid; m < N_MELS; m += WG) {
        let k0 = ints[I_F_FIRST + m];
        let len = ints[I_F_LEN + m];
        let off = ints[I_F_OFF + m];
        var acc = 0.0f;
        for (var i = 0u; i < len; i++) {
            acc = fma(fw[off + i], pw[k0 + i], acc);
        }
        mel_store(seg, m * N_FRAMES + frame, acc);
    }
}

// Pass 1: DFT_FRAMES frames of one segment per workgroup (spreading a long segment
// over many workgroups: one workgroup doing a whole 1 s speech clip ran so long that
// lavapipe dropped the dispatch), mel sums into `scratch`.
@compute @workgroup_size(WG)
fn mel_dft(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let g = group_index(wid);
    let seg = g / DFT_BLOCKS;
    if (seg >= params.n_clips * N_DISTINCT) {
        return;
    }
    let base = (seg / N_DISTINCT) * CLIP_SAMPLES + ints[I_OFFSETS + seg % N_DISTINCT];
    let f0 = (g % DFT_BLOCKS) * DFT_FRAMES;
    for (var f = f0; f < min(f0 + DFT_FRAMES, N_FRAMES); f++) {
        for (var n = lid; n < N_FFT; n += WG) {
            frame_buf[n] = frame_sample(base, f, n);
        }
        workgroupBarrier();
        for (var k = lid; k < N_FREQS; k += WG) {
            var re = f64(0.0);
            var im = f64(0.0);
            var idx = 0u;
            for (var n = 0u; n < N_FFT; n++) {
                let t = tw(idx);
                let x = frame_buf[n];
                re = re + x * t.x;
                im = im + x * t.y;
                idx += k;
                if (idx >= N_FFT) {
                    idx -= N_FFT;
                }
            }
            pw[k] = post_power(re * re + im * im);
        }
        workgroupBarrier();
        mel_frame(seg, lid, f);
        workgroupBarrier();
    }
}

// Pass 2: `finish` for each segment.
@compute @workgroup_size(WG)
fn mel_finish(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let seg = group_index(wid);
    if (seg >= params.n_clips * N_DISTINCT) {
        return;
    }
    init_peak(lid);
    workgroupBarrier();
    finish(seg, lid);
}
