#!/usr/bin/env python3
"""Trains a small PyTorch classifier on whole clips (``audio.length = "whole"``) and
scores it per file.

    python3 python/examples/train_whole.py --data OUT_DIR --max-frames 8000   # buckets
    python3 python/examples/train_whole.py --data OUT_DIR --crop 300          # crops
    python3 python/examples/train_whole.py --data OUT_DIR --max-frames 8000 --augment

OUT_DIR holds the splits `training`, `validation` and `testing` of one build with
``audio.length = "whole"``:

- variable-length utterances (``scripts/make_speech_corpus.py CORPUS --repeat 8``):
  train on duration buckets (``--max-frames``; every batch clips of similar length,
  ``(x, y, lengths)``), score each clip whole; the padding share of each epoch is printed.
- long recordings (``scripts/make_long_corpus.py CORPUS``): train on random crops
  (``--crop``), score each file over all its windows of that many frames, every half
  window, decided by mean probability with ``melctl.FileEvaluator``.

``--augment`` adds SpecAugment masks, a random gain and mixup in the Loader's Rust threads
(``melctl.Augment``; the targets become soft labels). The network pools over each item's
real frames only (``lengths``). It ends with ``file-level accuracy on testing: A (N files)``.
"""

import argparse
import sys
import time

import numpy as np
import torch
from torch import nn

import melctl


class Net(nn.Module):
    """Three 1-D convolutions over time (mel bins as channels), then the maximum and the
    mean over each item's real frames."""

    def __init__(self, n_mels: int, classes: int, width: int = 96):
        super().__init__()
        layers, inputs = [], n_mels
        for dilation in (1, 2, 4):
            layers += [nn.Conv1d(inputs, width, 5, padding=2 * dilation, dilation=dilation),
                       nn.BatchNorm1d(width), nn.ReLU()]
            inputs = width
        self.body = nn.Sequential(*layers)
        self.head = nn.Sequential(nn.Dropout(0.2), nn.Linear(2 * width, classes))

    def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        h = self.body(x)  # same length as x: "same" padding
        real = torch.arange(h.shape[-1])[None, None, :] < lengths[:, None, None]
        top = h.masked_fill(~real, float("-inf")).amax(-1)
        mean = (h * real).sum(-1) / lengths[:, None].clamp(min=1)
        return self.head(torch.cat([top, mean], dim=1))


def windows(clip: np.ndarray, crop: int):
    """``clip`` ``[n_mels, frames]`` as windows of ``crop`` frames every ``crop // 2``, the
    last ending at the clip's end (one zero-padded window for a shorter clip):
    ``(x [windows, n_mels, crop], lengths)``."""
    frames = clip.shape[1]
    starts = list(range(0, max(frames - crop, 0) + 1, max(crop // 2, 1)))
    if frames > crop and starts[-1] != frames - crop:
        starts.append(frames - crop)
    x = np.zeros((len(starts), clip.shape[0], crop), np.float32)
    lengths = []
    for k, s in enumerate(starts):
        n = min(crop, frames - s)
        x[k, :, :n] = clip[:, s : s + n]
        lengths.append(n)
    return x, np.array(lengths)


def evaluate(net, split, training, args):
    """(item accuracy, file-level report): each clip whole (buckets), or each file over
    all its windows (crops)."""
    ev = melctl.FileEvaluator.for_split(split, trained_on=training)
    mean, std = training.mean[:, None], training.std[:, None]
    right = total = 0
    net.eval()
    with torch.no_grad():
        if args.crop:
            for i in range(len(split)):
                x, lengths = windows(((split[i] - mean) / std).astype(np.float32), args.crop)
                probs = net(torch.from_numpy(x), torch.from_numpy(lengths)).softmax(-1)
                right += int((probs.argmax(-1).numpy() == split.labels[i]).sum())
                total += len(x)
                ev.add(probs.numpy(), np.full(len(x), i))
        else:
            longest = int(split.frames.max())
            loader = melctl.Loader(split, 256, max_frames=max(longest, args.max_frames),
                                   shuffle=False, normalize=(training.mean, training.std),
                                   threads=args.threads, with_index=True)
            for x, y, lengths, clip in loader:
                probs = net(torch.from_numpy(x), torch.from_numpy(lengths)).softmax(-1)
                right += int((probs.argmax(-1).numpy() == y).sum())
                total += len(y)
                ev.add(probs.numpy(), clip)
    return right / max(total, 1), ev.report("mean")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", required=True, help="the output folder of one melctl build of whole clips")
    how = ap.add_mutually_exclusive_group(required=True)
    how.add_argument("--max-frames", type=int, help="train on duration buckets of at most this many frames")
    how.add_argument("--crop", type=int, help="train on random crops of this many frames")
    ap.add_argument("--epochs", type=int, default=8)
    ap.add_argument("--batch", type=int, default=64, help="items per batch (at most, with buckets)")
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=None, help="loader and torch threads (default: all cores)")
    ap.add_argument("--augment", action="store_true",
                    help="SpecAugment masks (2 of up to 20 frames and a fifth of the clip, 2 of up to 8 bins), "
                         "a gain of up to ±3 dB "
                         "and mixup (α = 0.4), in the Loader")
    ap.add_argument("--mixup", type=float, default=0.4,
                    help="with --augment: mixup's α (0: no mixup)")
    args = ap.parse_args()
    try:
        train(args)
    except melctl.Error as e:  # a bad flag or dataset: its one-line message, no traceback
        sys.exit(f"train_whole: {e}")


def augmentation(args, training):
    """The Loader's augmentation for ``--augment`` (masks no wider than the items), or None."""
    if not args.augment:
        return None
    widest = args.crop or int(training.frames.max())
    return melctl.Augment(time_masks=2, time_mask_frames=min(20, widest), time_mask_share=0.2,
                          freq_masks=2, freq_mask_bins=8, gain_db=3.0,
                          mixup_alpha=args.mixup if args.mixup > 0 else None)


def train(args):
    started = time.perf_counter()
    torch.manual_seed(args.seed)
    if args.threads:
        torch.set_num_threads(args.threads)
    training, validation, testing = (melctl.open(args.data, s) for s in ("training", "validation", "testing"))
    if training.length != "whole":
        sys.exit(f"{args.data}: its clips are {training.length}, not whole (build with audio.length = \"whole\")")
    n_mels = training.clip_shape[0]
    classes = len(training.label_names)
    print(f"training: {len(training)} whole clips of {training.frames.min()} to {training.frames.max()} "
          f"frames, {classes} classes")
    net = Net(n_mels, classes)
    loader = melctl.Loader(training, args.batch, shuffle=True, seed=args.seed, normalize=True,
                           threads=args.threads, max_frames=args.max_frames, crop_frames=args.crop,
                           augment=augmentation(args, training))
    steps = 0
    for epoch in range(args.epochs):  # with buckets, each epoch has its own count
        loader.set_epoch(epoch)
        steps += len(loader)
    opt = torch.optim.AdamW(net.parameters(), lr=args.lr, weight_decay=1e-2)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, args.lr, total_steps=steps)
    for epoch in range(args.epochs):
        t = time.perf_counter()
        loader.set_epoch(epoch)
        padding = loader.padding_share()
        net.train()
        losses = []
        for x, y, lengths in loader:  # with mixup, y is soft labels [batch, classes]
            logits = net(torch.from_numpy(x), torch.from_numpy(lengths))
            loss = nn.functional.cross_entropy(logits, torch.from_numpy(y))
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            losses.append(loss.item())
        acc, report = evaluate(net, validation, training, args)
        print(f"epoch {epoch + 1}: loss {np.mean(losses):.4f}, padding {padding:.1%} "
              f"({time.perf_counter() - t:.1f} s); validation: item accuracy {acc:.3f}, "
              f"file-level accuracy {report['accuracy']:.3f} ({report['files']} files)")
    acc, report = evaluate(net, testing, training, args)
    print(f"testing: item accuracy {acc:.3f}; confusion (rows true, columns decided):")
    print(report["confusion"])
    print(f"file-level accuracy on testing: {report['accuracy']:.3f} ({report['files']} files) "
          f"in {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
