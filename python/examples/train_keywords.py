#!/usr/bin/env python3
"""Trains a small PyTorch keyword classifier on a melctl output and scores it per file.

    python3 python/examples/train_keywords.py --data OUT_DIR [--epochs N] [--batch N]

OUT_DIR holds the splits `training`, `validation` and `testing` of one build (for the
real-speech corpus: `scripts/make_speech_corpus.py CORPUS` then
`melctl build -i CORPUS -o OUT_DIR --preset speech-16k`). Batches come from
`melctl.Loader` (Rust threads, shuffled, normalised per mel bin with the statistics the
build stored); evaluation scores every segment of every file and decides each file by
mean probability with `melctl.FileEvaluator`. It ends with
`file-level accuracy on testing: A (N files)`.
"""

import argparse
import sys
import time

import numpy as np
import torch
from torch import nn

import melctl


class Net(nn.Module):
    """Two 1-D convolutions over time (mel bins as channels), then max over time: a
    keyword is found wherever in the clip it is spoken."""

    def __init__(self, n_mels: int, classes: int, width: int = 96):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv1d(n_mels, width, 5, padding=2),
            nn.BatchNorm1d(width),
            nn.ReLU(),
            nn.Conv1d(width, width, 5, padding=4, dilation=2),
            nn.BatchNorm1d(width),
            nn.ReLU(),
            nn.Conv1d(width, width, 5, padding=8, dilation=4),
            nn.BatchNorm1d(width),
            nn.ReLU(),
        )
        self.head = nn.Sequential(nn.Dropout(0.2), nn.Linear(2 * width, classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.body(x)
        return self.head(torch.cat([h.amax(-1), h.mean(-1)], dim=1))


def check_splits(training, others):
    """Class k of the model must be class k of every split, on the same features."""
    for s in others:
        if s.label_names != training.label_names:
            sys.exit(f"{s.name}: label map {s.label_names} differs from training's {training.label_names}")
        if s.config.get("mel") != training.config.get("mel") or s.segment_shape != training.segment_shape:
            sys.exit(f"{s.name}: built with another mel configuration than training")


def evaluate(net, split, training, batch, threads):
    """(segment accuracy, file-level report) of `split`, every segment scored."""
    ev = melctl.FileEvaluator.for_split(split, trained_on=training)
    right = total = 0
    net.eval()
    with torch.no_grad():
        for x, y, clip in melctl.Loader(split, batch, shuffle=False, normalize=(training.mean, training.std),
                                        threads=threads, with_index=True):
            probs = net(torch.from_numpy(x)).softmax(-1)
            right += int((probs.argmax(-1).numpy() == y).sum())
            total += len(y)
            ev.add(probs.numpy(), clip)
    return right / max(total, 1), ev.report("mean")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", required=True, help="the output folder of one melctl build")
    ap.add_argument("--epochs", type=int, default=12)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=None, help="loader and torch threads (default: all cores)")
    args = ap.parse_args()
    started = time.perf_counter()
    torch.manual_seed(args.seed)
    if args.threads:
        torch.set_num_threads(args.threads)
    training = melctl.open(args.data, "training")
    validation = melctl.open(args.data, "validation")
    testing = melctl.open(args.data, "testing")
    check_splits(training, [validation, testing])
    n_mels, frames = training.segment_shape
    classes = len(training.label_names)
    print(f"training: {len(training)} clips of {training.clip_shape}, {classes} classes; "
          f"normalisation stored: {training.mean is not None}")
    net = Net(n_mels, classes)
    loader = melctl.Loader(training, args.batch, shuffle=True, seed=args.seed, normalize=True,
                           threads=args.threads, drop_last=True)
    opt = torch.optim.AdamW(net.parameters(), lr=args.lr, weight_decay=1e-2)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, args.lr, total_steps=args.epochs * len(loader))
    for epoch in range(args.epochs):
        t = time.perf_counter()
        loader.set_epoch(epoch)
        net.train()
        losses = []
        for x, y in loader:
            loss = nn.functional.cross_entropy(net(torch.from_numpy(x)), torch.from_numpy(y))
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            losses.append(loss.item())
        seg, report = evaluate(net, validation, training, 512, args.threads)
        print(f"epoch {epoch + 1}: loss {np.mean(losses):.4f} ({time.perf_counter() - t:.1f} s); "
              f"validation: segment accuracy {seg:.3f}, file-level accuracy {report['accuracy']:.3f} "
              f"({report['files']} files)")
    seg, report = evaluate(net, testing, training, 512, args.threads)
    print(f"testing: segment accuracy {seg:.3f}; confusion (rows true, columns decided):")
    print(report["confusion"])
    print(f"file-level accuracy on testing: {report['accuracy']:.3f} ({report['files']} files) "
          f"in {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
