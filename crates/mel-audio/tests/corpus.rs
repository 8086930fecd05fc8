//! The format and bad-input corpus (fixtures/corpus, written by fixtures/make_corpus.py):
//! every good file decodes to the known signal, every bad file fails with its reason,
//! from the file and from its bytes alike.
#![allow(clippy::needless_range_loop)] // index loops over aligned signals read best

use std::path::{Path, PathBuf};

use mel_audio::{decode_bytes_into, decode_into};
use mel_core::spec::{AudioConfig, Downmix, TrimPolicy};

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/corpus")
}

fn manifest() -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(corpus().join("manifest.json")).unwrap()).unwrap()
}

fn audio(clip_seconds: f64) -> AudioConfig {
    AudioConfig {
        sample_rate: 4096,
        clip_seconds,
        ..AudioConfig::default()
    }
}

/// The corpus signal at 4096 Hz, mixed as `downmix` mixes `channels` channels.
fn reference(channels: usize, downmix: Downmix) -> Vec<f64> {
    let gain = match downmix {
        Downmix::Mean => (channels + 1) as f64 / (2 * channels) as f64,
        Downmix::First => 1.0 / channels as f64,
        Downmix::Channel(k) => (k as f64 + 1.0) / channels as f64,
    };
    (0..2048)
        .map(|i| {
            let t = i as f64 / 4096.0;
            gain * (0.3 * (2.0 * std::f64::consts::PI * 200.0 * t).sin()
                + 0.3 * (2.0 * std::f64::consts::PI * 700.0 * t).sin())
        })
        .collect()
}

/// (max |error| over the middle half, SNR in dB over the middle half, rms ratio in dB).
fn compare(got: &[f32], want: &[f64]) -> (f64, f64, f64) {
    let (lo, hi) = (want.len() / 4, 3 * want.len() / 4);
    let (mut max, mut err, mut sig, mut got_e) = (0.0f64, 0.0, 0.0, 0.0);
    for i in lo..hi {
        let d = got[i] as f64 - want[i];
        max = max.max(d.abs());
        err += d * d;
        sig += want[i] * want[i];
        got_e += (got[i] as f64).powi(2);
    }
    (
        max,
        10.0 * (sig / err.max(1e-300)).log10(),
        10.0 * (got_e / sig).log10(),
    )
}

/// SNR in dB over the middle half after a least-squares fit of the two tones (amplitude
/// and phase free): insensitive to the fraction-of-a-sample delay resampling may leave,
/// to which a power spectrum is blind too.
fn fitted_snr(got: &[f32]) -> f64 {
    let (lo, hi) = (got.len() / 4, 3 * got.len() / 4);
    let basis = |i: usize| {
        let t = i as f64 / 4096.0;
        let (a, b) = (
            2.0 * std::f64::consts::PI * 200.0 * t,
            2.0 * std::f64::consts::PI * 700.0 * t,
        );
        [a.sin(), a.cos(), b.sin(), b.cos()]
    };
    // Normal equations, 4x4, solved by Gaussian elimination.
    let mut m = [[0.0f64; 5]; 4];
    for i in lo..hi {
        let v = basis(i);
        for r in 0..4 {
            for c in 0..4 {
                m[r][c] += v[r] * v[c];
            }
            m[r][4] += v[r] * got[i] as f64;
        }
    }
    for p in 0..4 {
        for r in p + 1..4 {
            let f = m[r][p] / m[p][p];
            for c in p..5 {
                m[r][c] -= f * m[p][c];
            }
        }
    }
    let mut x = [0.0; 4];
    for r in (0..4).rev() {
        x[r] = (m[r][4] - (r + 1..4).map(|c| m[r][c] * x[c]).sum::<f64>()) / m[r][r];
    }
    let (mut sig, mut err) = (0.0, 0.0);
    for i in lo..hi {
        let fit: f64 = basis(i).iter().zip(&x).map(|(b, k)| b * k).sum();
        sig += fit * fit;
        err += (got[i] as f64 - fit).powi(2);
    }
    10.0 * (sig / err.max(1e-300)).log10()
}

fn decode_both(path: &Path, a: &AudioConfig) -> Result<Vec<f32>, String> {
    let mut x = vec![9.0; a.clip_samples()];
    let mut y = vec![9.0; a.clip_samples()];
    let rx = decode_into(path, a, &mut x)
        .map(|_| ())
        .map_err(|e| e.to_string());
    let bytes = std::fs::read(path).unwrap();
    let ry = decode_bytes_into(&bytes, path, a, &mut y)
        .map(|_| ())
        .map_err(|e| e.to_string());
    assert_eq!(rx, ry, "{}: file and bytes must agree", path.display());
    if rx.is_ok() {
        assert_eq!(x, y, "{}", path.display());
    }
    rx.map(|_| x)
}

#[test]
fn every_good_file_decodes_to_the_signal() {
    for g in manifest()["good"].as_array().unwrap() {
        let name = g["file"].as_str().unwrap();
        let channels = g["channels"].as_u64().unwrap() as usize;
        let check = g["check"].as_str().unwrap();
        for downmix in [
            Downmix::Mean,
            Downmix::First,
            Downmix::Channel(channels as u16 - 1),
        ] {
            let mut a = audio(0.5);
            a.downmix = downmix;
            let got =
                decode_both(&corpus().join(name), &a).unwrap_or_else(|e| panic!("{name}: {e}"));
            let (max, snr, level) = compare(&got, &reference(channels, downmix));
            println!(
                "{name:<22} {downmix:?}: max err {max:.2e}, SNR {snr:.1} dB, level {level:+.2} dB"
            );
            match check {
                "exact" => assert!(max <= 1.5 / 32768.0, "{name} {downmix:?}: max error {max}"),
                // Lossy codecs with encoder delay: the level must hold.
                "level" => assert!(
                    level.abs() < 1.5,
                    "{name} {downmix:?}: level {level:+.2} dB"
                ),
                // Lossy codecs whose priming the container says to drop (issue 22): the
                // level holds and the samples line up with the signal's.
                "aligned" => {
                    assert!(
                        level.abs() < 1.5,
                        "{name} {downmix:?}: level {level:+.2} dB"
                    );
                    assert!(
                        snr > 20.0,
                        "{name} {downmix:?}: SNR {snr:.1} dB against the signal, sample by sample (encoder priming kept?)"
                    );
                }
                snr_check => {
                    let min: f64 = snr_check.trim_start_matches("snr:").parse().unwrap();
                    let fitted = fitted_snr(&got);
                    println!("{name:<22} {downmix:?}: fitted SNR {fitted:.1} dB");
                    assert!(
                        fitted > min,
                        "{name} {downmix:?}: SNR {fitted:.1} dB, want > {min}"
                    );
                    assert!(
                        level.abs() < 0.1,
                        "{name} {downmix:?}: level {level:+.2} dB"
                    );
                    let _ = snr;
                }
            }
        }
    }
}

#[test]
fn every_bad_file_fails_with_its_reason() {
    for b in manifest()["bad"].as_array().unwrap() {
        let name = b["file"].as_str().unwrap();
        let want = b["reason_contains"].as_str().unwrap();
        let e = decode_both(&corpus().join(name), &audio(0.5)).unwrap_err();
        println!("{name:<22} -> {e}");
        assert!(e.contains(name), "{name}: the error names the file: {e}");
        assert!(e.contains(want), "{name}: expected {want:?} in: {e}");
    }
}

#[test]
fn a_picked_channel_that_does_not_exist_is_an_error() {
    let mut a = audio(0.5);
    a.downmix = Downmix::Channel(2);
    let e = decode_both(&corpus().join("pcm24-stereo.wav"), &a).unwrap_err();
    assert!(e.contains("2 channel(s)") && e.contains("channel 2"), "{e}");
    let e = decode_both(&corpus().join("clip.flac"), &a).unwrap_err();
    assert!(e.contains("1 channel(s)"), "{e}");
}

#[test]
fn files_far_longer_than_the_clip_are_bounded() {
    let long = corpus().join("long-silence.flac"); // 2^21 frames
    // From the start: only the beginning is decoded.
    let got = decode_both(&long, &audio(1.0)).unwrap();
    assert!(got.iter().all(|&x| x == 0.0));
    // From the centre the whole file is needed: refused, not held.
    let mut a = audio(1.0);
    a.trim = TrimPolicy::Center;
    let e = decode_both(&long, &a).unwrap_err();
    assert!(e.contains("longer than 64 clip lengths"), "{e}");
    // A WAV far longer than the clip (hound path) streams only the kept frames.
    let mut a = audio(20.0 / 4096.0);
    a.trim = TrimPolicy::Center;
    let mid = decode_both(&corpus().join("pcm16.wav"), &a).unwrap();
    assert_eq!(mid.len(), 20);
    let want = reference(1, Downmix::Mean);
    for (i, &v) in mid.iter().enumerate() {
        assert!((v as f64 - want[1014 + i]).abs() < 1.5 / 32768.0);
    }
}

#[test]
fn unreadable_paths_are_errors_not_panics() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("folder.wav");
    std::fs::create_dir(&dir).unwrap();
    let mut dst = vec![0.0; 2048];
    let e = decode_into(&dir, &audio(0.5), &mut dst)
        .unwrap_err()
        .to_string();
    assert!(e.contains("folder.wav"), "{e}");
    let link = t.path().join("dangling.wav");
    std::os::unix::fs::symlink(t.path().join("nowhere.wav"), &link).unwrap();
    let e = decode_into(&link, &audio(0.5), &mut dst)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("dangling.wav") && e.contains("cannot read"),
        "{e}"
    );
}

/// A file's verdict under `a`: the frames it holds, or the error, the same from the file
/// and from its bytes (checked by `decode_both`'s twin, here with the frame count).
fn verdict(path: &Path, a: &AudioConfig) -> Result<usize, String> {
    let mut x = vec![9.0; a.clip_samples()];
    let mut y = vec![9.0; a.clip_samples()];
    let rx = decode_into(path, a, &mut x).map_err(|e| e.to_string());
    let bytes = std::fs::read(path).unwrap();
    let ry = decode_bytes_into(&bytes, path, a, &mut y).map_err(|e| e.to_string());
    assert_eq!(rx, ry, "{}: file and bytes must agree", path.display());
    rx.map(|info| info.frames)
}

fn entries(kind: &str) -> Vec<serde_json::Value> {
    manifest()[kind].as_array().cloned().unwrap_or_default()
}

/// Issue 22 B: one decoding contract whatever the route. Every corpus file (good, bad
/// and other people's) gets the same verdict and frame count at its own rate and at
/// another (which once sent WAV to hound or to symphonia), trimmed from the start or the
/// centre, for a clip shorter or longer than the file, from the file or its bytes; the
/// dry run's probe agrees with it; good files hold the frames an independent decoder
/// finds in them.
#[test]
fn every_file_has_one_verdict_and_frame_count_on_every_route() {
    let all: Vec<_> = ["good", "bad", "real", "extra"]
        .iter()
        .flat_map(|k| entries(k))
        .collect();
    for e in &all {
        let name = e["file"].as_str().unwrap();
        let path = corpus().join(name);
        let own = e["rate"].as_u64().unwrap_or(4096) as u32;
        let other = if own == 8000 { 4096 } else { 8000 };
        let mut seen: Vec<(String, Result<usize, String>)> = Vec::new();
        for rate in [own, other] {
            for trim in [TrimPolicy::Start, TrimPolicy::Center] {
                for seconds in [0.05, 2.0] {
                    let a = AudioConfig {
                        sample_rate: rate,
                        clip_seconds: seconds,
                        trim,
                        ..AudioConfig::default()
                    };
                    let v = verdict(&path, &a);
                    seen.push((format!("{rate} Hz, {trim:?}, {seconds} s"), v));
                    let p = mel_audio::probe(&path, &a).map_err(|e| e.to_string());
                    match (&p, &seen.last().unwrap().1) {
                        (Ok(()), Ok(_)) => {}
                        (Err(pe), Err(de)) => assert_eq!(pe, de, "{name}: probe and decode"),
                        // Only the samples themselves can fail what the header passes.
                        (Ok(()), Err(de)) => assert!(
                            de.contains("non-finite") || de.contains("beyond the float32 range"),
                            "{name}: probe passed, decode: {de}"
                        ),
                        (Err(pe), Ok(_)) => panic!("{name}: probe refused what decodes: {pe}"),
                    }
                }
            }
        }
        let first = &seen[0].1;
        for (how, v) in &seen {
            assert_eq!(v, first, "{name}: {how} differs from {}", seen[0].0);
        }
        println!("{name:<50} {first:?}");
        match (e.get("reason_contains"), first) {
            (Some(want), Err(got)) => {
                let want = want.as_str().unwrap();
                assert!(got.contains(want), "{name}: expected {want:?} in: {got}");
                assert!(
                    got.contains(name.rsplit('/').next().unwrap()),
                    "{name}: {got}"
                );
            }
            (Some(_), Ok(n)) => panic!("{name}: must be refused, decoded {n} frames"),
            (None, Err(got)) => panic!("{name}: must decode: {got}"),
            (None, Ok(n)) => {
                // The count a reference decoder finds.
                let want = e.get("frames").and_then(|f| f.as_u64());
                assert_eq!(Some(*n as u64), want, "{name}: frames");
            }
        }
    }
}

/// Our samples against libsndfile's or ffmpeg's (fixtures/corpus/ref, written by
/// make_corpus.py), at the file's own rate, all of it, mixed by the mean.
#[test]
fn decoded_samples_match_an_independent_decoder() {
    let all: Vec<_> = ["good", "real", "extra"]
        .iter()
        .flat_map(|k| entries(k))
        .collect();
    for e in all.iter().filter(|e| e.get("frames").is_some()) {
        let name = e["file"].as_str().unwrap();
        let rate = e["rate"].as_u64().unwrap() as u32;
        let ref_path = corpus()
            .join("ref")
            .join(format!("{}.f32", name.replace('/', "_")));
        let want: Vec<f32> = std::fs::read(&ref_path)
            .unwrap()
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        let a = AudioConfig {
            sample_rate: rate,
            clip_seconds: want.len() as f64 / rate as f64,
            ..AudioConfig::default()
        };
        let got = decode_both(&corpus().join(name), &a).unwrap_or_else(|e| panic!("{e}"));
        let max = got
            .iter()
            .zip(&want)
            .map(|(g, w)| (g - w).abs())
            .fold(0.0f32, f32::max);
        let err: f64 = got
            .iter()
            .zip(&want)
            .map(|(g, w)| ((g - w) as f64).powi(2))
            .sum();
        let sig: f64 = want.iter().map(|w| (*w as f64).powi(2)).sum();
        let snr = 10.0 * (sig / err.max(1e-300)).log10();
        let reference = e["reference"].as_str().unwrap();
        println!("{name:<50} vs {reference}: max |diff| {max:.1e}, SNR {snr:.0} dB");
        match e["check"].as_str() {
            Some("exact") | None => assert!(
                max <= 2e-6,
                "{name}: max |diff| {max:e} against {reference}"
            ),
            _ => assert!(snr > 25.0, "{name}: SNR {snr:.1} dB against {reference}"),
        }
        if e.get("per_channel").is_some() {
            channels_match(e, &a);
        }
    }
}

/// Every channel of a multichannel file against the reference decoder's
/// (`ref/NAME.channels.f32`, interleaved, in melctl's channel order): a mean alone can hide
/// channels decoded wrong.
fn channels_match(e: &serde_json::Value, a: &AudioConfig) {
    let name = e["file"].as_str().unwrap();
    let channels = e["channels"].as_u64().unwrap() as usize;
    let want: Vec<f32> = std::fs::read(corpus().join("ref").join(format!("{name}.channels.f32")))
        .unwrap()
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    for k in 0..channels {
        let mut a = a.clone();
        a.downmix = Downmix::Channel(k as u16);
        let got = decode_both(&corpus().join(name), &a).unwrap();
        let (mut err, mut sig) = (0.0f64, 0.0f64);
        for (g, w) in got.iter().zip(want.iter().skip(k).step_by(channels)) {
            err += ((g - w) as f64).powi(2);
            sig += (*w as f64).powi(2);
        }
        let snr = 10.0 * (sig / err.max(1e-300)).log10();
        println!("{name:<50} channel {k}: SNR {snr:.0} dB");
        assert!(snr > 60.0, "{name}: channel {k} SNR {snr:.1} dB");
    }
}

/// A file cut short past the part a clip keeps (trim from the start stops decoding
/// early) is still found truncated: the rest of its packets are counted.
#[test]
fn a_cut_file_is_truncated_even_when_the_clip_needs_only_its_start() {
    let t = tempfile::tempdir().unwrap();
    let long = std::fs::read(corpus().join("long-silence.flac")).unwrap();
    let cut = t.path().join("cut.flac");
    std::fs::write(&cut, &long[..long.len() / 2]).unwrap();
    for rate in [4096, 8000] {
        let a = AudioConfig {
            sample_rate: rate,
            clip_seconds: 1.0,
            ..AudioConfig::default()
        };
        let e = verdict(&cut, &a).unwrap_err();
        assert!(
            e.contains("truncated data: the header promises 2097152 frames"),
            "{e}"
        );
        let whole = verdict(&corpus().join("long-silence.flac"), &a).unwrap();
        assert_eq!(whole, 1 << 21);
    }
}

/// An AIFF's COMM chunk promises `numSampleFrames`; symphonia counts the SSND chunk's
/// data instead, so an AIFF promising more frames than its sound data holds was stored
/// zero-padded with exit 0 (issue 22, left from the attack round). It is truncated on every
/// route, and the file as written still decodes to the frames it promises.
#[test]
fn an_aiff_holding_fewer_frames_than_its_comm_chunk_promises_is_truncated() {
    let t = tempfile::tempdir().unwrap();
    let mut bytes = std::fs::read(corpus().join("clip.aiff")).unwrap();
    let mut pos = 12;
    let comm = loop {
        let size = u32::from_be_bytes(bytes[pos + 4..pos + 8].try_into().unwrap()) as usize;
        if &bytes[pos..pos + 4] == b"COMM" {
            break pos + 8;
        }
        pos += 8 + size + (size & 1);
    };
    let frames = u32::from_be_bytes(bytes[comm + 2..comm + 6].try_into().unwrap());
    for (rate, trim) in [(4096, TrimPolicy::Start), (8000, TrimPolicy::Center)] {
        let a = AudioConfig {
            sample_rate: rate,
            clip_seconds: 8.0,
            trim,
            ..AudioConfig::default()
        };
        assert_eq!(
            verdict(&corpus().join("clip.aiff"), &a).unwrap(),
            frames as usize
        );
    }
    bytes[comm + 2..comm + 6].copy_from_slice(&(frames * 2).to_be_bytes());
    let lying = t.path().join("lying.aiff");
    std::fs::write(&lying, &bytes).unwrap();
    for (rate, trim) in [(4096, TrimPolicy::Start), (8000, TrimPolicy::Center)] {
        let a = AudioConfig {
            sample_rate: rate,
            clip_seconds: 8.0,
            trim,
            ..AudioConfig::default()
        };
        let e = verdict(&lying, &a).unwrap_err();
        let want = format!("truncated data: the header promises {} frames", frames * 2);
        assert!(e.contains(&want), "{rate} Hz {trim:?}: {e}");
        let p = mel_audio::probe(&lying, &a).unwrap_err().to_string();
        assert_eq!(p, e, "the dry run's probe agrees");
    }
}

/// Two tagged MP3s joined with `cat`: the first one's Xing/Info tag counts only its own
/// frames, and symphonia trims everything past that count away, so the second half
/// vanished with exit 0 (issue 22 attack round). It is refused as an inconsistent header,
/// on every rate and trim; the file alone still decodes.
#[test]
fn a_tagged_mp3_with_more_data_than_its_tag_counts_is_refused() {
    let t = tempfile::tempdir().unwrap();
    for name in ["clip.mp3", "id3-tagged.mp3"] {
        let one = std::fs::read(corpus().join(name)).unwrap();
        let joined = t.path().join(format!("joined-{name}"));
        std::fs::write(
            &joined,
            [one.as_slice(), one.as_slice(), one.as_slice()].concat(),
        )
        .unwrap();
        for (rate, trim) in [(4096, TrimPolicy::Start), (8000, TrimPolicy::Center)] {
            let a = AudioConfig {
                sample_rate: rate,
                clip_seconds: 4.0,
                trim,
                ..AudioConfig::default()
            };
            let alone = verdict(&corpus().join(name), &a);
            assert!(alone.is_ok(), "{name} alone: {alone:?}");
            let e = verdict(&joined, &a).unwrap_err();
            // The second copy's ID3v2 tag sits where a frame should start (the frame
            // walk names it); without tags the first Xing tag's count gives it away.
            assert!(
                (e.contains("inconsistent header") && e.contains("tag promises"))
                    || e.contains("no MP3 frame header where frame"),
                "{name}: {e}"
            );
        }
    }
}

/// An MP3 without a Xing/LAME tag promises no frame count, so a damaged frame (its sync
/// broken, bytes missing from it) or a cut inside the last one was skipped by the reader
/// and the rest shifted, with exit 0 (attack round 4): the frame walk refuses each.
#[test]
fn a_damaged_or_cut_mp3_without_a_frame_count_is_refused() {
    let t = tempfile::tempdir().unwrap();
    let bytes = std::fs::read(corpus().join("clip.mp3")).unwrap();
    // The frames' starts, walked here from the headers' fields (an independent reading of
    // ISO 11172-3 / 13818-3; the fixture is MPEG 2.5 layer III at 8 kHz, variable rate).
    let v1 = [
        [
            0, 32, 64, 96, 128, 160, 192, 224, 256, 288, 320, 352, 384, 416, 448,
        ],
        [
            0, 32, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 384,
        ],
        [
            0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320,
        ],
    ];
    let v2 = [
        [
            0, 32, 48, 56, 64, 80, 96, 112, 128, 144, 160, 176, 192, 224, 256,
        ],
        [0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160],
    ];
    let mut starts = Vec::new();
    let mut pos = 0usize;
    while pos + 4 <= bytes.len() && bytes[pos] == 0xff {
        starts.push(pos);
        let h = &bytes[pos..pos + 4];
        let (version, row) = ((h[1] >> 3) & 3, 3 - ((h[1] >> 1) & 3) as usize);
        let (bi, pad) = ((h[2] >> 4) as usize, ((h[2] >> 1) & 1) as usize);
        let base = [44100, 48000, 32000][((h[2] >> 2) & 3) as usize];
        let (kbps, rate) = match version {
            3 => (v1[row][bi], base),
            2 => (v2[usize::from(row > 0)][bi], base / 2),
            _ => (v2[usize::from(row > 0)][bi], base / 4),
        };
        pos += match (row, version) {
            (0, _) => (12 * kbps * 1000 / rate + pad) * 4,
            (2, 0 | 2) => 72 * kbps * 1000 / rate + pad,
            _ => 144 * kbps * 1000 / rate + pad,
        };
    }
    assert_eq!(pos, bytes.len(), "the fixture walks whole: {starts:?}");
    assert!(starts.len() >= 8, "{starts:?}");
    let a = AudioConfig {
        sample_rate: 4096,
        clip_seconds: 4.0,
        ..AudioConfig::default()
    };
    assert!(verdict(&corpus().join("clip.mp3"), &a).is_ok());
    let f = starts[5];
    let mut no_sync = bytes.clone();
    no_sync[f + 1] = 0;
    let mut short = bytes.clone();
    short.drain(f + 20..f + 40);
    let cut = bytes[..starts[starts.len() - 1] + 30].to_vec();
    for (name, data, says) in [
        (
            "no-sync.mp3",
            no_sync,
            "no MP3 frame header where frame 5 should start",
        ),
        (
            "short.mp3",
            short,
            "no MP3 frame header where frame 6 should start",
        ),
        ("cut.mp3", cut, "truncated: the file ends inside MP3 frame"),
    ] {
        let p = t.path().join(name);
        std::fs::write(&p, &data).unwrap();
        let e = verdict(&p, &a).unwrap_err();
        assert!(e.contains(says), "{name}: {e}");
    }
}

/// Hostile variations of every corpus file (cut anywhere, bytes flipped, size fields set
/// to 0, 0xFFFFFFFF or noise) end in a row or an error, never a panic, and a row is
/// always finite with a non-zero frame count, from the file and its bytes alike.
#[test]
fn mutated_corpus_files_never_panic_or_store_garbage_counts() {
    let t = tempfile::tempdir().unwrap();
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut rand = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let all: Vec<_> = ["good", "bad", "real", "extra"]
        .iter()
        .flat_map(|k| entries(k))
        .collect();
    let (mut ok, mut refused) = (0, 0);
    for e in &all {
        let name = e["file"].as_str().unwrap();
        let orig = std::fs::read(corpus().join(name)).unwrap();
        if orig.is_empty() || orig.len() > 1 << 16 {
            continue; // long-silence.flac: 2^21 frames decoded 240 times is slow, not new
        }
        for k in 0..16 {
            let mut b = orig.clone();
            match k % 4 {
                0 => b.truncate(rand() as usize % b.len()),
                1 => {
                    for _ in 0..1 + rand() % 4 {
                        let i = rand() as usize % b.len();
                        b[i] ^= 1 << (rand() % 8);
                    }
                }
                _ => {
                    // A 32-bit field in the first 64 bytes (sizes, rates, counts).
                    let i = (rand() as usize % 16) * 4 % b.len().saturating_sub(4).max(1);
                    let v: u32 = [0, u32::MAX, rand() as u32][(rand() % 3) as usize];
                    if i + 4 <= b.len() {
                        b[i..i + 4].copy_from_slice(&v.to_le_bytes());
                    }
                }
            }
            let path = t.path().join(format!("m{k}-{}", name.replace('/', "_")));
            std::fs::write(&path, &b).unwrap();
            for rate in [4096, 8000] {
                let a = AudioConfig {
                    sample_rate: rate,
                    clip_seconds: 0.25,
                    ..AudioConfig::default()
                };
                match verdict(&path, &a) {
                    Ok(frames) => {
                        ok += 1;
                        assert!(frames > 0, "{}", path.display());
                        let got = decode_both(&path, &a).unwrap();
                        assert!(got.iter().all(|x| x.is_finite()), "{}", path.display());
                    }
                    Err(e) => {
                        refused += 1;
                        assert!(!e.contains("panicked"), "{e}");
                    }
                }
                let _ = mel_audio::probe(&path, &a);
            }
        }
    }
    println!("{ok} mutated files decoded, {refused} refused");
}

/// Issue 22, attack round 3: the verdict of a made file at its own rate (4096 Hz) and at
/// another, trimmed from the start: the same from the file, its bytes and the dry run's
/// probe.
fn verdict_everywhere(path: &Path) -> Result<usize, String> {
    let mut first = None;
    for (rate, trim) in [(4096, TrimPolicy::Start), (8000, TrimPolicy::Center)] {
        let a = AudioConfig {
            sample_rate: rate,
            clip_seconds: 0.1,
            trim,
            ..AudioConfig::default()
        };
        let v = verdict(path, &a);
        let p = mel_audio::probe(path, &a).map_err(|e| e.to_string());
        match (&v, &p) {
            (Ok(_), Ok(())) => {}
            (Err(d), Err(p)) => assert_eq!(d, p, "{}: probe and decode", path.display()),
            _ => panic!("{}: decode {v:?}, probe {p:?}", path.display()),
        }
        if let Some(f) = &first {
            assert_eq!(&v, f, "{}: {rate} Hz", path.display());
        }
        first = Some(v);
    }
    first.unwrap()
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

/// Where native FLAC frame `n` (< 128, fixed block size) starts in `b`.
fn flac_frame(b: &[u8], n: u8) -> usize {
    (42..b.len() - 5)
        .find(|&i| b[i] == 0xff && b[i + 1] == 0xf8 && b[i + 4] == n)
        .unwrap_or_else(|| panic!("no FLAC frame {n}"))
}

/// A FLAC frame failing its CRC: symphonia's reader dropped it and resynchronised on the
/// next, so a streamed FLAC (STREAMINFO total 0, as ffmpeg writes to a pipe) lost 256
/// frames and the rest came early, with exit 0; with a total in STREAMINFO it was called
/// "truncated". It is refused as corrupt, naming the frame, either way.
#[test]
fn a_flac_frame_failing_its_crc_is_refused_as_corrupt_not_skipped() {
    let t = tempfile::tempdir().unwrap();
    let streamed = std::fs::read(corpus().join("streamed.flac")).unwrap();
    // STREAMINFO's 36-bit total: the low 4 bits of byte 21 (of the file), then 22..26.
    assert_eq!(
        (streamed[21] & 0xf, &streamed[22..26]),
        (0, &[0u8; 4][..]),
        "STREAMINFO total is 0"
    );
    let mut with_total = streamed.clone();
    with_total[22..26].copy_from_slice(&2048u32.to_be_bytes());
    assert_eq!(
        verdict_everywhere(&write(t.path(), "total.flac", &with_total)),
        Ok(2048)
    );
    for (name, good) in [("streamed", &streamed), ("total", &with_total)] {
        let mut b = good.clone();
        let (f4, f5) = (flac_frame(&b, 4), flac_frame(&b, 5));
        let mid = (f4 + f5) / 2;
        b[mid] ^= 0xff;
        b[mid + 1] ^= 0xff;
        let e =
            verdict_everywhere(&write(t.path(), &format!("{name}-flipped.flac"), &b)).unwrap_err();
        assert!(
            e.contains("corrupt audio data: 256 frames missing at frame 1024")
                && e.contains("flipped.flac"),
            "{name}: {e}"
        );
    }
}

/// ID3v1 and APEv2 tags after a raw stream: symphonia's FLAC reader took the tag for part
/// of the last frame, which then failed its CRC and vanished (the clip was padded, exit
/// 0). The stream is bounded before the tag: every frame is read, as ffmpeg, sox and
/// libsndfile do, with the samples of the untagged file.
#[test]
fn a_trailing_id3v1_or_apev2_tag_after_a_raw_stream_is_not_audio() {
    let t = tempfile::tempdir().unwrap();
    let id3v1 = {
        let mut tag = b"TAG".to_vec();
        tag.resize(128, b'0');
        tag
    };
    let ape = {
        let item = b"\x05\0\0\0\0\0\0\0Title\0melct";
        let footer = |flags: u32| {
            let mut f = b"APETAGEX".to_vec();
            f.extend_from_slice(&2000u32.to_le_bytes());
            f.extend_from_slice(&((item.len() + 32) as u32).to_le_bytes());
            f.extend_from_slice(&1u32.to_le_bytes());
            f.extend_from_slice(&flags.to_le_bytes());
            f.extend_from_slice(&[0; 8]);
            f
        };
        [footer(0xa000_0000), item.to_vec(), footer(0x8000_0000)].concat()
    };
    for name in ["streamed.flac", "clip.flac", "adts.aac"] {
        let plain = corpus().join(name);
        let want = verdict_everywhere(&plain).unwrap();
        let a = AudioConfig {
            sample_rate: 4096,
            clip_seconds: 2.0,
            ..AudioConfig::default()
        };
        let samples = decode_both(&plain, &a).unwrap();
        let bytes = std::fs::read(&plain).unwrap();
        for (tag, tail) in [
            ("id3v1", id3v1.clone()),
            ("ape", ape.clone()),
            ("ape+id3v1", [ape.clone(), id3v1.clone()].concat()),
        ] {
            let p = write(
                t.path(),
                &format!("{tag}-{name}"),
                &[bytes.as_slice(), &tail].concat(),
            );
            assert_eq!(verdict_everywhere(&p), Ok(want), "{tag} after {name}");
            assert_eq!(decode_both(&p, &a).unwrap(), samples, "{tag} after {name}");
        }
    }
}

/// Ogg pages: a byte flipped in one made its page fail its CRC, and symphonia's Ogg reader
/// skipped the page (Ogg FLAC lost a third of its frames, exit 0; Vorbis was refused only
/// as a side effect). Every page is checked before decoding: a damaged one is refused
/// naming it, for either codec.
#[test]
fn a_damaged_ogg_page_is_refused_not_skipped() {
    let t = tempfile::tempdir().unwrap();
    for name in ["paged-flac.oga", "clip.ogg"] {
        assert!(verdict_everywhere(&corpus().join(name)).is_ok(), "{name}");
        let mut b = std::fs::read(corpus().join(name)).unwrap();
        let at = b.len() * 6 / 10;
        b[at] ^= 1;
        let e = verdict_everywhere(&write(t.path(), &format!("flipped-{name}"), &b)).unwrap_err();
        assert!(
            e.contains("corrupt audio data: Ogg page") && e.contains("fails its CRC check"),
            "{name}: {e}"
        );
    }
}

/// An ADTS frame whose sync word is gone: symphonia's ADTS reader scanned on to the next
/// sync word and counted frames on, so one AAC frame vanished and the rest came early,
/// exit 0. The frame chain is walked first: a frame missing where the last one ended is
/// refused naming it, and so is a file cut inside its last frame.
#[test]
fn an_adts_frame_without_its_sync_word_is_refused() {
    let t = tempfile::tempdir().unwrap();
    let b = std::fs::read(corpus().join("adts.aac")).unwrap();
    let len = |i: usize| {
        ((b[i + 3] as usize & 3) << 11) | ((b[i + 4] as usize) << 3) | (b[i + 5] as usize >> 5)
    };
    let f2 = len(0) + len(len(0));
    let mut zeroed = b.clone();
    zeroed[f2] = 0;
    zeroed[f2 + 1] = 0;
    let e = verdict_everywhere(&write(t.path(), "no-sync.aac", &zeroed)).unwrap_err();
    assert!(
        e.contains(&format!(
            "no ADTS frame header where frame 2 should start, at byte {f2}"
        )),
        "{e}"
    );
    let e = verdict_everywhere(&write(t.path(), "cut.aac", &b[..b.len() - 10])).unwrap_err();
    assert!(
        e.contains("truncated: the file ends inside ADTS frame"),
        "{e}"
    );
}

/// An Ogg file cut inside its last page decoded to the pages before it with exit 0 (Ogg
/// makes no promise of a length, and symphonia's unexpected end of file was taken for the
/// end). A file cut inside a page is truncated. One cut exactly at a page boundary cannot
/// be told from a complete file whose last page lacks the end-of-stream flag (which
/// libsndfile and ffmpeg read, and so does melctl: bug report item 25), unless the
/// stream states its length (Ogg FLAC's STREAMINFO total, which ffmpeg leaves at 0).
#[test]
fn an_ogg_file_cut_inside_its_last_page_is_truncated() {
    let t = tempfile::tempdir().unwrap();
    for name in ["paged-flac.oga", "clip.ogg", "flac.oga"] {
        let b = std::fs::read(corpus().join(name)).unwrap();
        let last = b.windows(4).rposition(|w| w == b"OggS").unwrap();
        let cut = write(t.path(), &format!("cut-{name}"), &b[..(last + b.len()) / 2]);
        let e = verdict_everywhere(&cut).unwrap_err();
        assert!(
            e.contains("truncated: the file ends inside Ogg page") && e.contains("cut-"),
            "{name}: {e}"
        );
    }
    for name in ["paged-flac.oga", "loop-mp3.ogg"] {
        let b = std::fs::read(corpus().join(name)).unwrap();
        let last = b.windows(4).rposition(|w| w == b"OggS").unwrap();
        let whole = verdict_everywhere(&corpus().join(name)).unwrap();
        let short = verdict_everywhere(&write(t.path(), &format!("short-{name}"), &b[..last]));
        assert!(short.clone().is_ok_and(|n| n < whole), "{name}: {short:?}");
    }
    // Ogg FLAC with a STREAMINFO total is held to it.
    let mut b = std::fs::read(corpus().join("paged-flac.oga")).unwrap();
    let si = b.windows(4).position(|w| w == b"fLaC").unwrap() + 8;
    assert_eq!(
        (b[si + 13] & 0xf, &b[si + 14..si + 18]),
        (0, &[0u8; 4][..]),
        "ffmpeg's total of 0"
    );
    b[si + 14..si + 18].copy_from_slice(&2048u32.to_be_bytes());
    // The first page's CRC, over the page with its CRC field zeroed.
    let body: usize = b[27..27 + b[26] as usize].iter().map(|&x| x as usize).sum();
    let end = 27 + b[26] as usize + body;
    b[22..26].fill(0);
    let crc = b[..end].iter().fold(0u32, |crc, &x| {
        (0..8).fold(crc ^ ((x as u32) << 24), |c, _| {
            if c & 0x8000_0000 != 0 {
                (c << 1) ^ 0x04c1_1db7
            } else {
                c << 1
            }
        })
    });
    b[22..26].copy_from_slice(&crc.to_le_bytes());
    assert_eq!(
        verdict_everywhere(&write(t.path(), "total.oga", &b)),
        Ok(2048)
    );
    let last = b.windows(4).rposition(|w| w == b"OggS").unwrap();
    let e = verdict_everywhere(&write(t.path(), "short-total.oga", &b[..last])).unwrap_err();
    assert!(
        e.contains("truncated data: the header promises 2048 frames"),
        "{e}"
    );
}

/// A WAV with two data chunks: only the first was read (libsndfile refuses the file).
/// Which one holds the audio is a guess, so it is refused, naming the second.
#[test]
fn a_wav_with_two_data_chunks_is_refused() {
    let t = tempfile::tempdir().unwrap();
    let b = std::fs::read(corpus().join("pcm16.wav")).unwrap();
    let data = b.windows(4).position(|w| w == b"data").unwrap();
    let mut two = b.clone();
    two.extend_from_slice(&b[data..]);
    let e = verdict_everywhere(&write(t.path(), "two-data.wav", &two)).unwrap_err();
    assert!(
        e.contains(&format!("a second data chunk at byte {}", b.len())),
        "{e}"
    );
}

/// AIFF and CAF store the sample rate as a float: 4096.5 Hz was read as 4096 and the
/// audio stored at a rate it is not, without resampling. A rate that is not a whole
/// number of hertz is refused by name.
#[test]
fn a_fractional_sample_rate_is_refused_by_name() {
    let t = tempfile::tempdir().unwrap();
    // AIFF: COMM's rate, an 80-bit extended float: 4096.5 = (2^63 + 2^50) x 2^(12 - 63).
    let mut aiff = std::fs::read(corpus().join("clip.aiff")).unwrap();
    let comm = aiff.windows(4).position(|w| w == b"COMM").unwrap() + 8;
    assert_eq!(&aiff[comm + 8..comm + 10], &[0x40, 0x0b]);
    aiff[comm + 10..comm + 18].copy_from_slice(&((1u64 << 63) | (1u64 << 50)).to_be_bytes());
    // CAF: desc's rate, a 64-bit float.
    let mut caf = std::fs::read(corpus().join("clip.caf")).unwrap();
    let desc = caf.windows(4).position(|w| w == b"desc").unwrap() + 12;
    assert_eq!(
        f64::from_be_bytes(caf[desc..desc + 8].try_into().unwrap()),
        4096.0
    );
    caf[desc..desc + 8].copy_from_slice(&4096.5f64.to_be_bytes());
    for (name, bytes) in [("frac.aiff", aiff), ("frac.caf", caf)] {
        let e = verdict_everywhere(&write(t.path(), name, &bytes)).unwrap_err();
        assert!(
            e.contains("unsupported sample rate: 4096.5 Hz is not a whole number of hertz"),
            "{name}: {e}"
        );
    }
}

/// Trimming the container states that melctl cannot apply exactly is refused by name, on
/// every route, never decoded with the priming kept (issue 22): an MP4 edit played at
/// another rate or presenting nothing, a negative Matroska DiscardPadding.
#[test]
fn trimming_that_cannot_be_applied_is_refused_by_name() {
    let t = tempfile::tempdir().unwrap();
    let m4a = std::fs::read(corpus().join("aac.m4a")).unwrap();
    // elst v0: size, "elst", version/flags, count 1, (duration, media_time, rate).
    let e = m4a.windows(4).position(|w| w == b"elst").unwrap() + 4;
    assert_eq!(&m4a[e..e + 8], &[0, 0, 0, 0, 0, 0, 0, 1]);
    let mut fast = m4a.clone();
    fast[e + 16..e + 20].copy_from_slice(&0x0002_0000u32.to_be_bytes());
    let mut empty = m4a.clone();
    empty[e + 12..e + 16].copy_from_slice(&(-1i32).to_be_bytes());
    let mka = std::fs::read(corpus().join("vorbis.mka")).unwrap();
    // DiscardPadding (0x75A2), 4 bytes, 12 ms on the last block.
    let d = mka.windows(2).rposition(|w| w == [0x75, 0xA2]).unwrap() + 3;
    assert_eq!(&mka[d - 1..d + 4], &[0x84, 0x00, 0xB7, 0x1B, 0x00]);
    let mut negative = mka.clone();
    negative[d..d + 4].copy_from_slice(&(-12_000_000i32).to_be_bytes());
    for (name, bytes, want) in [
        (
            "fast.m4a",
            fast,
            "unsupported: an MP4 edit played at rate 2",
        ),
        (
            "empty.m4a",
            empty,
            "unsupported: an MP4 edit list that is one empty edit",
        ),
        (
            "negative.mka",
            negative,
            "unsupported: a negative Matroska DiscardPadding",
        ),
    ] {
        let e = verdict_everywhere(&write(t.path(), name, &bytes)).unwrap_err();
        assert!(e.contains(want) && e.contains(name), "{name}: {e}");
    }
}

/// The frames a corpus file holds, the same at every rate, trim, from the file, its bytes
/// and the dry run's probe ([`verdict_everywhere`]).
fn corpus_verdict(name: &str) -> Result<usize, String> {
    verdict_everywhere(&corpus().join(name))
}

/// The reference decoder's frame count for a corpus file, from the manifest.
fn reference_frames(name: &str) -> usize {
    ["good", "real", "extra"]
        .iter()
        .flat_map(|k| entries(k))
        .find(|e| e["file"] == name)
        .and_then(|e| e["frames"].as_u64())
        .unwrap_or_else(|| panic!("{name}: no reference frame count")) as usize
}

/// Bug report item 2: a WAV with two `fmt ` chunks was read at the second one's rate
/// (8000 Hz for a 4096 Hz file: pitch-shifted); sox and ffmpeg read the first, libsndfile
/// refuses the file. It is refused by name, as a second `data` chunk is. The same `fmt `
/// said twice is one format, and decodes.
#[test]
fn a_second_fmt_chunk_unlike_the_first_is_refused() {
    let e = corpus_verdict("two-fmt.wav").unwrap_err();
    assert!(
        e.contains("malformed: a second fmt chunk at byte 36, unlike the first"),
        "{e}"
    );
    let t = tempfile::tempdir().unwrap();
    let b = std::fs::read(corpus().join("pcm16.wav")).unwrap();
    let at = b.windows(4).position(|w| w == b"fmt ").unwrap();
    let twice = [&b[..at + 24], &b[at..]].concat();
    let p = write(t.path(), "fmt-twice.wav", &twice);
    assert_eq!(verdict_everywhere(&p), Ok(2048));
    let a = audio(0.5);
    assert_eq!(
        decode_both(&p, &a).unwrap(),
        decode_both(&corpus().join("pcm16.wav"), &a).unwrap()
    );
}

/// Bug report item 15: errors that named the wrong cause. A chained Ogg file was "decoder
/// needs to be reset"; a FLAC whose STREAMINFO rate disagrees with its frames was
/// "truncated"; a float64 sample of 5e299 was "NaN or infinity".
#[test]
fn errors_name_the_real_cause() {
    // The dry run's probe reads a WAV's header only, so is checked by the verdict test.
    let e = decode_both(&corpus().join("float64-huge.wav"), &audio(0.5)).unwrap_err();
    assert!(
        e.contains("corrupt audio data: a sample of 5e299 at frame 10, beyond the float32 range")
            && !e.contains("NaN"),
        "{e}"
    );
    for (name, says, not) in [
        ("chained.ogg", "unsupported: a chained Ogg stream", "reset"),
        (
            "flac-rate-mismatch.flac",
            "inconsistent header: STREAMINFO says a sample rate of 16000 Hz, the first frame's header 8000 Hz",
            "truncated",
        ),
    ] {
        let e = corpus_verdict(name).unwrap_err();
        assert!(e.contains(says) && !e.contains(not), "{name}: {e}");
    }
}

/// A float sample rate header (CAF's 64-bit, AIFF's 80-bit) that is no rate: NaN and
/// -4096 were "zero sample rate" (symphonia's saturating cast), inf and 1e300 "4294967295
/// Hz", 1e-300 was printed in 300 digits.
#[test]
fn a_float_sample_rate_that_is_no_rate_is_named_as_such() {
    let t = tempfile::tempdir().unwrap();
    let caf = std::fs::read(corpus().join("clip.caf")).unwrap();
    let desc = caf.windows(4).position(|w| w == b"desc").unwrap() + 12;
    let aiff = std::fs::read(corpus().join("clip.aiff")).unwrap();
    let comm = aiff.windows(4).position(|w| w == b"COMM").unwrap() + 8;
    // 80-bit extended: sign and biased exponent (16 bits), then a 64-bit mantissa.
    let ext = |negative: bool, exp: u16, mantissa: u64| {
        let mut b = ((u16::from(negative) << 15) | exp).to_be_bytes().to_vec();
        b.extend_from_slice(&mantissa.to_be_bytes());
        b
    };
    let one = 1u64 << 63;
    for (what, f, x, says) in [
        (
            "neg",
            -4096.0,
            ext(true, 16383 + 12, one),
            "sample rate is -4096 Hz (under 1 Hz)",
        ),
        (
            "nan",
            f64::NAN,
            ext(false, 0x7fff, one | 1),
            "sample rate is not a number (NaN)",
        ),
        (
            "inf",
            f64::INFINITY,
            ext(false, 0x7fff, one),
            "sample rate is infinite, above the limit of 768000 Hz",
        ),
        (
            "big",
            1e300,
            ext(false, 16383 + 997, one),
            "e300 Hz is above the limit of 768000 Hz",
        ),
        (
            "tiny",
            1e-300,
            ext(false, 16383 - 996, one),
            "e-300 Hz (under 1 Hz)",
        ),
    ] {
        let mut c = caf.clone();
        c[desc..desc + 8].copy_from_slice(&f64::to_be_bytes(f));
        let mut a = aiff.clone();
        a[comm + 8..comm + 18].copy_from_slice(&x);
        for (name, bytes) in [(format!("{what}.caf"), c), (format!("{what}.aiff"), a)] {
            let e = verdict_everywhere(&write(t.path(), &name, &bytes)).unwrap_err();
            assert!(e.contains(says), "{name}: {e}");
            assert!(
                e.len() < 200 && !e.contains("4294967295") && !e.contains("zero sample rate"),
                "{name}: {e}"
            );
        }
    }
}

/// Bug report item 15: a decoder library's message is never the reason (symphonia's
/// `isomp4: no atom pending read`, `malformed stream: ...`): every corpus file, cut short
/// and with bytes flipped, is refused in melctl's words.
#[test]
fn a_decoder_librarys_message_is_never_the_reason() {
    let t = tempfile::tempdir().unwrap();
    let symphonia_words = [
        "isomp4",
        "mkv:",
        "ogg:",
        "ogg (",
        "flac:",
        "vorbis:",
        "aac:",
        "adts:",
        "mpa:",
        "riff",
        "wav:",
        "aiff:",
        "aifc:",
        "caf:",
        "adpcm",
        "alac:",
        "pcm:",
        "common (",
        "malformed stream",
        "unsupported feature",
        "limit reached",
        "needs to be reset",
        "codec id",
        "(fix me)",
        "panicked",
        "index out of bounds",
    ];
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut rand = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let a = AudioConfig {
        sample_rate: 4096,
        clip_seconds: 0.25,
        ..AudioConfig::default()
    };
    let mut refused = 0;
    for e in ["good", "bad", "real", "extra"]
        .iter()
        .flat_map(|k| entries(k))
    {
        let name = e["file"].as_str().unwrap();
        let orig = std::fs::read(corpus().join(name)).unwrap();
        if orig.len() < 64 || orig.len() > 1 << 16 {
            continue;
        }
        for k in 0..24 {
            let mut b = orig.clone();
            if k % 2 == 0 {
                b.truncate(64 + rand() as usize % (b.len() - 64));
            } else {
                for _ in 0..1 + rand() % 3 {
                    let i = 16 + rand() as usize % (b.len() - 16);
                    b[i] ^= 1 << (rand() % 8);
                }
            }
            let p = write(t.path(), &format!("m{k}-{}", name.replace('/', "_")), &b);
            if let Err(e) = verdict(&p, &a) {
                refused += 1;
                let reason = e.strip_prefix(&format!("{}: ", p.display())).unwrap();
                for w in symphonia_words {
                    assert!(!reason.contains(w), "{name} ({k}): {e}");
                }
                assert!(!e.contains('\n'), "{name} ({k}): {e}");
            }
        }
    }
    println!("{refused} refusals checked");
}

/// Bug report item 16: a refused file's reason quoted its first 8 bytes (a manifest row
/// naming `/etc/shadow` printed the start of it in the summary and the JSON report). It
/// names what was expected, never the bytes.
#[test]
fn a_refused_files_reason_never_quotes_its_bytes() {
    let t = tempfile::tempdir().unwrap();
    let secret = b"root:$y$j9T$secretsalt$hash:19000:0:99999:7:::\n";
    let mut riff = b"RIFF\x10\0\0\0QZXW".to_vec();
    riff.extend_from_slice(secret);
    let mut aifc = b"FORM\0\0\0\x40AIFCCOMM\0\0\0\x26".to_vec();
    aifc.extend_from_slice(&[
        0, 1, 0, 0, 0, 0, 0, 16, 0x40, 0x0b, 0x80, 0, 0, 0, 0, 0, 0, 0,
    ]);
    aifc.extend_from_slice(b"QZXW\x0broot:secret");
    aifc.resize(72, 0);
    for (name, bytes) in [
        ("shadow", secret.to_vec()),
        ("shadow.wav", secret.to_vec()),
        ("riff.wav", riff),
        ("aifc.aiff", aifc),
    ] {
        let p = write(t.path(), name, &bytes);
        let e = verdict(&p, &audio(0.5)).unwrap_err();
        let reason = e.strip_prefix(&format!("{}: ", p.display())).unwrap();
        for leak in ["root", "secret", "QZXW", "72 6f", "6f 6f"] {
            assert!(!reason.contains(leak), "{name}: {e}");
        }
        println!("{name}: {reason}");
    }
}

/// Bug report item 24: ffmpeg 5.1 writes a DiscardPadding of 0 on the first block of MP3 in
/// Matroska, which was refused as "a Matroska DiscardPadding on block 1". It drops
/// nothing: the file decodes to what ffmpeg (5.1 and 9.0) decodes.
#[test]
fn a_zero_matroska_discard_padding_drops_nothing() {
    assert_eq!(
        corpus_verdict("mp3-zero-discard.mka"),
        Ok(reference_frames("mp3-zero-discard.mka"))
    );
}

/// Bug report item 26: stereo IMA ADPCM whose last block is partial (249 of 512 bytes)
/// lost the block's 241 whole frames (symphonia's reader drops a partial block); ffmpeg
/// and sox decode them. So for MS ADPCM (100 bytes of a 1024-byte mono block: 188 frames,
/// as ffmpeg and sox decode it).
#[test]
fn a_partial_last_adpcm_block_gives_its_whole_frames() {
    assert_eq!(corpus_verdict("ima-adpcm-partial.wav"), Ok(4 * 505 + 241));
    assert_eq!(reference_frames("ima-adpcm-partial.wav"), 4 * 505 + 241);
    let t = tempfile::tempdir().unwrap();
    let b = std::fs::read(corpus().join("ms-adpcm.wav")).unwrap();
    let data = b.windows(4).rposition(|w| w == b"data").unwrap();
    assert_eq!(&b[data + 4..data + 8], &2048u32.to_le_bytes());
    let mut cut = b[..data + 8 + 1024 + 100].to_vec();
    cut[data + 4..data + 8].copy_from_slice(&1124u32.to_le_bytes());
    let len = cut.len() as u32 - 8;
    cut[4..8].copy_from_slice(&len.to_le_bytes());
    assert_eq!(
        verdict_everywhere(&write(t.path(), "ms-partial.wav", &cut)),
        Ok(2036 + 188)
    );
}

/// Bug report item 28: MP3s with trailing tags were refused as "no MP3 frame header where
/// frame N should start". A tag after the last frame is not audio: ID3v1 and APEv2 (found
/// from the end), and the ones found only from where the frames end: an APEv2 tag whose
/// footer is gone, Lyrics3 v2 before ID3v1, an appended ID3v2 tag.
#[test]
fn tags_after_the_last_mp3_or_adts_frame_are_not_audio() {
    let t = tempfile::tempdir().unwrap();
    let id3v1 = {
        let mut tag = b"TAG".to_vec();
        tag.resize(128, b'0');
        tag
    };
    let item = b"\x06\0\0\0\0\0\0\0Title\0melctl";
    let ape_block = |flags: u32| {
        let mut f = b"APETAGEX".to_vec();
        f.extend_from_slice(&2000u32.to_le_bytes());
        f.extend_from_slice(&((item.len() + 32) as u32).to_le_bytes());
        f.extend_from_slice(&1u32.to_le_bytes());
        f.extend_from_slice(&flags.to_le_bytes());
        f.extend_from_slice(&[0; 8]);
        f
    };
    let ape = [
        ape_block(0xa000_0000),
        item.to_vec(),
        ape_block(0x8000_0000),
    ]
    .concat();
    // A header and the items, the footer cut off.
    let ape_no_footer = [ape_block(0xa000_0000), item.to_vec()].concat();
    let ape_no_footer = {
        let mut b = ape_no_footer;
        b[12..16].copy_from_slice(&(item.len() as u32).to_le_bytes());
        b
    };
    let lyrics = {
        let body = b"LYRICSBEGININD00002  LYR00005hello".to_vec();
        [
            body.clone(),
            format!("{:06}LYRICS200", body.len()).into_bytes(),
        ]
        .concat()
    };
    let id3v2 = b"ID3\x04\0\0\0\0\0\x0aTIT2\0\0\0\0\0\0".to_vec();
    for name in [
        "clip.mp3",
        "id3-tagged.mp3",
        "lame-vbr-short.mp3",
        "adts.aac",
    ] {
        let plain = corpus().join(name);
        let want = verdict_everywhere(&plain).unwrap();
        let a = AudioConfig {
            sample_rate: 4096,
            clip_seconds: 2.0,
            ..AudioConfig::default()
        };
        let samples = decode_both(&plain, &a).unwrap();
        let bytes = std::fs::read(&plain).unwrap();
        for (tag, tail) in [
            ("id3v1", id3v1.clone()),
            ("ape", ape.clone()),
            ("ape+id3v1", [ape.clone(), id3v1.clone()].concat()),
            ("id3v1+ape", [id3v1.clone(), ape.clone()].concat()),
            ("ape-no-footer", ape_no_footer.clone()),
            ("lyrics3+id3v1", [lyrics.clone(), id3v1.clone()].concat()),
            ("id3v2", id3v2.clone()),
        ] {
            let p = write(
                t.path(),
                &format!("{tag}-{name}"),
                &[bytes.as_slice(), &tail].concat(),
            );
            assert_eq!(verdict_everywhere(&p), Ok(want), "{tag} after {name}");
            assert_eq!(decode_both(&p, &a).unwrap(), samples, "{tag} after {name}");
        }
    }
}

/// Bug report item 28: a short LAME VBR MP3 (a Xing/LAME header and a few frames) decodes
/// to the frames libsndfile (mpg123) and ffmpeg decode.
#[test]
fn a_short_lame_vbr_mp3_decodes() {
    assert_eq!(corpus_verdict("lame-vbr-short.mp3"), Ok(1323));
    assert_eq!(reference_frames("lame-vbr-short.mp3"), 1323);
}

/// Bug report item 25: a complete Ogg Vorbis file whose last page lacks the end-of-stream
/// flag was refused as truncated; libsndfile decodes it to its last granule position.
#[test]
fn an_ogg_vorbis_file_without_its_end_of_stream_flag_decodes() {
    assert_eq!(corpus_verdict("vorbis-no-eos.ogg"), Ok(4000));
    assert_eq!(reference_frames("vorbis-no-eos.ogg"), 4000);
}

/// Bug report item 23: AAC at 96 kHz in M4A was refused as "the track has no sample rate":
/// the MP4 sample entry's 16-bit rate field cannot hold 96000 (ffmpeg writes 0); the
/// AudioSpecificConfig holds it.
#[test]
fn aac_at_96_khz_takes_its_rate_from_the_audio_specific_config() {
    // ffmpeg 9.0 (which made the file) writes 48000 in the field, 5.1 writes 0.
    let t = tempfile::tempdir().unwrap();
    let b = std::fs::read(corpus().join("aac-96k.m4a")).unwrap();
    let rate = b.windows(4).position(|w| w == b"mp4a").unwrap() + 4 + 24;
    assert_eq!(&b[rate..rate + 4], &[0xbb, 0x80, 0, 0], "48000 in 16.16");
    let mut zero = b.clone();
    zero[rate..rate + 4].fill(0);
    let zero = write(t.path(), "rate-0.m4a", &zero);
    let a = AudioConfig {
        sample_rate: 8000,
        clip_seconds: 0.5,
        ..AudioConfig::default()
    };
    let want = decode_both(&corpus().join("aac-96k.m4a"), &a).unwrap();
    for p in [corpus().join("aac-96k.m4a"), zero] {
        assert_eq!(verdict_everywhere(&p), Ok(48000), "{}", p.display());
        let mut dst = vec![0.0; 4000];
        let info = decode_into(&p, &a, &mut dst).unwrap();
        assert_eq!((info.rate, info.frames), (96000, 48000));
        assert_eq!(dst, want);
    }
}

/// Bug report item 27: files made with ffmpeg's `-stream_loop` were refused as "truncated
/// data: the header promises N frames, the file holds N-k". No frame is lost: ffmpeg
/// leaves a gap in the timestamps at each loop point (the source's priming, which its
/// decoder dropped: 1105 frames of an MP3, 1024 of AAC), so the last Ogg granule position
/// and the MP4 sample table's durations count the gaps too; libsndfile and ffmpeg decode
/// the frames melctl decodes. A cut MP4 is still truncated, by its box sizes.
#[test]
fn stream_looped_files_hold_every_frame_their_packets_decode_to() {
    for name in ["loop-mp3.ogg", "loop-aac.m4a"] {
        assert_eq!(corpus_verdict(name), Ok(reference_frames(name)), "{name}");
    }
    let t = tempfile::tempdir().unwrap();
    for name in ["aac.m4a", "alac.m4a"] {
        let b = std::fs::read(corpus().join(name)).unwrap();
        let e = verdict_everywhere(&write(t.path(), name, &b[..b.len() * 2 / 3])).unwrap_err();
        assert!(
            e.contains("truncated: the file ends inside its MP4"),
            "{name}: {e}"
        );
    }
}

/// Bug report item 22: 5.1 AAC in M4A was refused as "unsupported codec: codec id
/// 0x1007". symphonia decodes mono and stereo AAC-LC: the refusal names the codec and the
/// channel layout.
#[test]
fn aac_beyond_stereo_is_refused_naming_the_codec_and_layout() {
    let e = corpus_verdict("aac-5.1.m4a").unwrap_err();
    assert!(
        e.contains("AAC with 6 channels (5.1) is not supported") && !e.contains("0x1007"),
        "{e}"
    );
}

/// Bug report item 21: 5.1 Ogg Vorbis decoded up to 29 dB off on the five coupled
/// channels: symphonia-codec-vorbis 0.6.1 undid libvorbis's four coupling steps first to
/// last (vendor/symphonia-codec-vorbis undoes them last to first, as the specification
/// says). Every channel matches libsndfile's.
#[test]
fn a_5_1_ogg_vorbis_file_decodes_every_channel_as_libsndfile_does() {
    let e = entries("good")
        .into_iter()
        .find(|e| e["file"] == "vorbis-5.1.ogg")
        .unwrap();
    assert_eq!(corpus_verdict("vorbis-5.1.ogg"), Ok(22050));
    let a = AudioConfig {
        sample_rate: 44100,
        clip_seconds: 0.5,
        ..AudioConfig::default()
    };
    channels_match(&e, &a);
}
