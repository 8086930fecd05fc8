#!/usr/bin/env python3
"""The resampling grid of `crates/mel-audio/tests/resample_grid.rs`, measured the same way
for two reference resamplers, and the Markdown table BENCHMARKS.md quotes.

  soxr        python-soxr's `resample(x, from, to, quality="VHQ")` (libsoxr, very high quality).
  torchaudio  `torchaudio.functional.resample` with its defaults (sinc_interp_hann,
              lowpass_filter_width=6, rolloff=0.99). torch is not needed: the kernel and
              its strided application are ported to numpy below, step for step from
              `_get_sinc_resample_kernel` / `_apply_sinc_resample_kernel` (float64 here,
              so the figures are the algorithm's, not float32 rounding's).
  melctl      read from the test's printed table (--melctl FILE), if given; --before FILE
              adds the same table from an older build (worst of its three qualities).

Each (from, to): tones at 0.02-0.9 of the lower Nyquist against the exact tone (gain in dB
and the delay from the fitted phase), tones at 0.95 and 0.99 (nothing but the tone may come
out), and for a downsampling tones above the new Nyquist (their level out). Measures are
taken over the middle half of 8192 output samples.

    pip install numpy soxr
    cargo test -p mel-audio --test resample_grid -- --nocapture > /tmp/grid.txt
    python3 benches/resample_reference.py --melctl /tmp/grid.txt > /tmp/table.md
"""
import argparse
import math
import re
import sys

import numpy as np

FROM = [4000, 8000, 8012, 11025, 12000, 16000, 22050, 24000, 32000, 44100, 48000,
        88200, 96000, 176400, 192000, 352800, 384000]
TO = [4096, 8000, 16000, 22050]
PASS = [0.02, 0.17, 0.41, 0.63, 0.81, 0.9]
TRANSITION = [0.95, 0.99]
OUT_LEN = 8192
AMP = 0.5
PHASE = 0.3


def tone(freq, rate, n):
    return AMP * np.sin(2 * np.pi * freq / rate * np.arange(n) + PHASE)


def middle(n):
    return slice(n // 4, n - n // 4)


def against_tone(y, freq, rate):
    """(gain dB, everything else dB re the input tone, delay in output samples)."""
    i = np.arange(len(y))[middle(len(y))]
    v = np.asarray(y, dtype=np.float64)[middle(len(y))]
    w = 2 * np.pi * freq / rate
    basis = np.stack([np.sin(w * i + PHASE), np.cos(w * i + PHASE)], axis=1)
    (a, b), *_ = np.linalg.lstsq(basis, v, rcond=None)
    rest = v - basis @ np.array([a, b])
    rms = math.sqrt(np.mean(rest ** 2))
    gain = math.hypot(a, b) / AMP
    return (20 * math.log10(gain), 20 * math.log10(max(rms * math.sqrt(2) / AMP, 1e-20)),
            -math.atan2(b, a) / w)


def level(y):
    v = np.asarray(y, dtype=np.float64)[middle(len(y))]
    return 20 * math.log10(max(math.sqrt(np.mean(v ** 2)) * math.sqrt(2) / AMP, 1e-20))


def stop_tones(frm, to):
    lo, hi = to / 2, frm / 2
    if hi <= lo:
        return []
    f = [k * lo for k in (1.001, 1.01, 1.05, 1.2, 1.5, 2.5, 5.0, 20.0, 60.0) if k * lo < 0.999 * hi]
    return f + [(lo + hi) / 2, hi - 0.01 * (hi - lo)]


class Torchaudio:
    """torchaudio.functional.resample(x, frm, to) with its defaults, in numpy."""

    def __init__(self, frm, to, lowpass_filter_width=6, rolloff=0.99):
        g = math.gcd(frm, to)
        self.orig, self.new = frm // g, to // g
        base = min(self.orig, self.new) * rolloff
        self.width = math.ceil(lowpass_filter_width * self.orig / base)
        idx = np.arange(-self.width, self.width + self.orig, dtype=np.float64)[None, :] / self.orig
        t = np.arange(0, -self.new, -1, dtype=np.float64)[:, None] / self.new + idx
        t *= base
        t = np.clip(t, -lowpass_filter_width, lowpass_filter_width)
        window = np.cos(t * math.pi / lowpass_filter_width / 2) ** 2
        t *= math.pi
        scale = base / self.orig
        with np.errstate(invalid="ignore", divide="ignore"):
            k = np.where(t == 0, 1.0, np.sin(t) / t)
        self.kernel = k * window * scale  # (new, 2·width + orig)

    def __call__(self, x):
        length = len(x)
        padded = np.pad(x, (self.width, self.width + self.orig))
        taps = self.kernel.shape[1]
        blocks = (len(padded) - taps) // self.orig + 1  # conv1d with stride=orig
        frames = np.lib.stride_tricks.as_strided(
            padded, shape=(blocks, taps), strides=(padded.strides[0] * self.orig, padded.strides[0]))
        out = (frames @ self.kernel.T).reshape(-1)  # (blocks, new) -> phase-interleaved
        return out[: math.ceil(self.new * length / self.orig)]


def make_soxr(frm, to):
    import soxr
    return lambda x: soxr.resample(x, frm, to, quality="VHQ")


def measure(resampler, frm, to):
    n_in = -(-OUT_LEN * frm // to)
    nyq = min(frm, to) / 2
    worst = {"pass": 0.0, "spurious": -300.0, "stop": -300.0, "delay": 0.0}
    for frac in PASS + TRANSITION:
        f = frac * nyq
        gain, spurious, delay = against_tone(resampler(tone(f, frm, n_in)), f, to)
        if frac in PASS:
            worst["pass"] = max(worst["pass"], gain, key=abs)
            if frac >= 0.17:
                worst["delay"] = max(worst["delay"], delay, key=abs)
        worst["spurious"] = max(worst["spurious"], spurious)
    for f in stop_tones(frm, to):
        worst["stop"] = max(worst["stop"], level(resampler(tone(f, frm, n_in))))
    return worst


def read_melctl(path):
    """The test's table: worst over the three qualities per (from, to)."""
    rows = {}
    pat = re.compile(r"^\s*(\d+) ->\s+(\d+)\s+(\w+)\s+([-+]\d+\.\d+)\s+(-?\d+\.\d+)\s+(-?\d+\.\d+|-)\s+([-+]\d+\.\d+)")
    for line in open(path):
        m = pat.match(line)
        if not m:
            continue
        frm, to = int(m[1]), int(m[2])
        w = rows.setdefault((frm, to), {"pass": 0.0, "spurious": -300.0, "stop": -300.0, "delay": 0.0})
        w["pass"] = max(w["pass"], float(m[4]), key=abs)
        w["spurious"] = max(w["spurious"], float(m[5]))
        if m[6] != "-":
            w["stop"] = max(w["stop"], float(m[6]))
        w["delay"] = max(w["delay"], float(m[7]), key=abs)
    return rows


def cell(w):
    """pass-band error | other content | stop band, as table cells."""
    stop = "–" if w["stop"] <= -300 else f"{w['stop']:.0f}"
    return f"{w['pass']:+.3f} | {w['spurious']:.0f} | {stop}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--melctl", help="the grid test's --nocapture output")
    ap.add_argument("--before", help="the same from an older melctl, for a 'before' column")
    args = ap.parse_args()
    melctl = read_melctl(args.melctl) if args.melctl else {}
    before = read_melctl(args.before) if args.before else {}
    head = ["from → to"]
    if before:
        head += ["before: pass dB", "before: other dB", "before: stop dB"]
    if melctl:
        head += ["melctl pass dB", "melctl other dB", "melctl stop dB"]
    head += ["soxr VHQ pass dB", "soxr other dB", "soxr stop dB",
             "torchaudio pass dB", "torchaudio other dB", "torchaudio stop dB"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    summary = {}
    for to in TO:
        for frm in FROM:
            if frm == to:
                continue
            cols = [f"{frm} → {to}"]
            results = {}
            if before:
                results["before"] = before[(frm, to)]
                cols.append(cell(before[(frm, to)]))
            if melctl:
                results["melctl"] = melctl[(frm, to)]
                cols.append(cell(melctl[(frm, to)]))
            for name, r in (("soxr", make_soxr(frm, to)), ("torchaudio", Torchaudio(frm, to))):
                w = measure(r, frm, to)
                results[name] = w
                cols.append(cell(w))
            for name, w in results.items():
                s = summary.setdefault(name, {"pass": 0.0, "spurious": -300.0, "stop": -300.0,
                                              "delay": 0.0, "fail": 0})
                s["delay"] = max(s["delay"], w["delay"], key=abs)
                s["pass"] = max(s["pass"], w["pass"], key=abs)
                s["spurious"] = max(s["spurious"], w["spurious"])
                s["stop"] = max(s["stop"], w["stop"])
                s["fail"] += abs(w["pass"]) > 0.1 or w["spurious"] > -80 or w["stop"] > -80
            print("| " + " | ".join(cols) + " |")
            sys.stdout.flush()
    print()
    for name, s in summary.items():
        print(f"{name}: worst pass-band error {s['pass']:+.3f} dB, worst other content "
              f"{s['spurious']:.1f} dB, worst stop band {s['stop']:.1f} dB, worst delay "
              f"{s['delay']:+.4f} samples; "
              f"{s['fail']} of {len(TO) * len(FROM) - 3} pairs miss the contract")


if __name__ == "__main__":
    main()
