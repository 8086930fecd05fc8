//! The facade as a consumer uses it: golden-exact spectrograms with automatic backend
//! choice, from samples, files and batches.

use hound::{SampleFormat, WavSpec, WavWriter};
use mel_tests::{compare, goldens};
use melkit::{AutoReason, BackendKind, BackendRequest, Dtype, Extractor, MelPlan};

#[test]
fn auto_choice_computes_every_golden_variant_within_the_tolerance() {
    for g in goldens() {
        let mut spec = g.config.spec();
        spec.dtype = Dtype::F32;
        let mut ex = Extractor::new(&spec, &BackendRequest::auto()).unwrap();
        let (kind, auto) = (ex.choice().kind, ex.choice().auto);
        match kind {
            BackendKind::Cpu => assert_eq!(auto, Some(AutoReason::NoGpu)),
            BackendKind::Cuda => assert_eq!(auto, Some(AutoReason::CudaDevice)),
            BackendKind::Wgpu => assert_eq!(auto, Some(AutoReason::HardwareAdapter)),
            BackendKind::Auto => panic!("auto must resolve"),
        }
        let f = ex.clips(&g.input).unwrap();
        assert_eq!(f.shape(), g.shape.as_slice(), "{}", g.name);
        let plan = MelPlan::new(&spec).unwrap();
        let c = compare(&plan, f.values(), &g.expected);
        assert!(
            c.first_mismatch.is_none(),
            "{}: {:?}",
            g.name,
            c.first_mismatch
        );
        println!(
            "{} via {}: worst {:.6} dB",
            g.name,
            kind.name(),
            c.worst_error
        );
    }
}

#[test]
fn a_file_samples_and_a_batch_give_the_same_numbers() {
    let g = goldens().into_iter().find(|g| g.name == "leak-4k").unwrap();
    let n = g.input_i16.len() / g.clips;
    let t = tempfile::tempdir().unwrap();
    let path = t.path().join("clip.wav");
    let spec = WavSpec {
        channels: 1,
        sample_rate: 4096,
        bits_per_sample: 16,
        sample_format: SampleFormat::Int,
    };
    let mut w = WavWriter::create(&path, spec).unwrap();
    for &s in &g.input_i16[n..2 * n] {
        w.write_sample(s).unwrap();
    }
    w.finalize().unwrap();
    let mut ex = Extractor::new(&g.config.spec(), &BackendRequest::of(BackendKind::Cpu)).unwrap();
    let from_file = ex.file(&path).unwrap();
    let from_samples = ex.samples(&g.input[n..2 * n], 4096).unwrap();
    let batch = ex.clips(&g.input).unwrap();
    assert_eq!(from_file, from_samples);
    assert_eq!(from_file.shape(), &[1, 79, 3, 32, 5]);
    assert_eq!(from_file.clip_f32(0), batch.clip_f32(1));
    // Another rate is resampled, a shorter clip padded, as a decoded file would be.
    let half: Vec<f32> = g.input[n..n + 2048].to_vec();
    let short = ex.samples(&half, 2048).unwrap();
    assert_eq!(short.shape(), &[1, 79, 3, 32, 5]);
    assert!(ex.clips(&g.input[..100]).is_err());
    assert!(ex.clips(&[]).is_err());
}

#[test]
fn discovery_prewarmed_from_several_threads_gives_one_answer() {
    // Four threads start (and wait for) the background discovery at once; every choice
    // afterwards uses its one answer and starts the same kind of backend.
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| drop(melkit::backend::prewarm(BackendKind::Auto)));
        }
    });
    let spec = goldens()[0].config.spec();
    let plan = MelPlan::new(&spec).unwrap();
    let kind = || {
        melkit::choose(&plan, &BackendRequest::auto())
            .unwrap()
            .choice
            .kind
    };
    let (a, b) = (kind(), kind());
    assert!(a == b && a != BackendKind::Auto, "{a:?} then {b:?}");
}

/// Clips a build would refuse as not finite are refused by the extractor too (it called
/// the backend directly and returned +inf spectrograms for samples of 1e30).
#[test]
fn clips_a_build_would_refuse_as_not_finite_are_errors() {
    let g = goldens().into_iter().find(|g| g.name == "leak-4k").unwrap();
    let n = g.input.len() / g.clips;
    let mut ex = Extractor::new(&g.config.spec(), &BackendRequest::of(BackendKind::Cpu)).unwrap();
    assert!(ex.clips(&g.input[..n]).is_ok());
    for bad in [1e30f32, f32::NAN, f32::INFINITY] {
        let mut clip = g.input[..n].to_vec();
        clip[n / 2] = bad;
        let e = ex.clips(&clip).unwrap_err().to_string();
        assert!(e.contains("clip 0"), "{bad}: {e}");
    }
}

/// Rows of any length and rate become the clips `samples` makes of each one, in parts of
/// `ROWS_AT_ONCE`; a bad row is named by its number in the whole call.
#[test]
fn rows_are_each_what_samples_gives_and_a_bad_row_is_named() {
    let g = goldens().into_iter().find(|g| g.name == "leak-4k").unwrap();
    let n = g.input.len() / g.clips;
    let mut ex = Extractor::new(&g.config.spec(), &BackendRequest::of(BackendKind::Cpu)).unwrap();
    // 70 rows of 3000 samples at 2048 Hz: more rows than one part holds.
    let rows = melkit::extract::ROWS_AT_ONCE + 6;
    let row_len = 3000;
    let samples: Vec<f32> = (0..rows * row_len).map(|i| g.input[i % n] * 0.9).collect();
    let all = ex.rows(&samples, row_len, 2048).unwrap();
    assert_eq!(all.shape(), &[rows, 79, 3, 32, 5]);
    for k in [0, 1, melkit::extract::ROWS_AT_ONCE, rows - 1] {
        let one = ex
            .samples(&samples[k * row_len..(k + 1) * row_len], 2048)
            .unwrap();
        assert_eq!(all.clip_f32(k), one.clip_f32(0), "row {k}");
    }
    let mut bad = samples.clone();
    bad[(melkit::extract::ROWS_AT_ONCE + 2) * row_len + 5] = f32::NAN;
    let e = ex.rows(&bad, row_len, 2048).unwrap_err().to_string();
    assert!(
        e.contains(&format!("row {}", melkit::extract::ROWS_AT_ONCE + 2)),
        "{e}"
    );
    assert!(ex.rows(&samples[..10], 3, 2048).is_err());
    assert!(ex.rows(&samples, 0, 2048).is_err());
}
