"""How much of deflate's gain on leak-4k output is the repeated short windows?

leak-4k stores 237 short windows per clip ([79, 3, 32, 5]), of which 159 are distinct
(window (k, 2) is window (k + 1, 0)). Reads 256 clips of a default build's split,
in chunks of 16 clips as the compressed sink writes them, byte-shuffled as HDF5's
shuffle filter does, and deflates (zlib level 1) the full layout and the distinct
windows alone. Usage: python3 benches/deflate_repeats.py OUT/training.h5
"""
import sys, time, zlib
import h5py, numpy as np
d = h5py.File(sys.argv[1], "r")["mel"]
x = d[:256].view(np.uint16)                      # [256, 79, 3, 32, 5]
j = 2 * np.arange(79)[:, None] + np.arange(3)    # distinct window of (long, short)
first = {}
for k in range(79):
    for s in range(3):
        first.setdefault(int(j[k, s]), (k, s))
assert len(first) == 159
distinct = np.stack([x[:, k, s] for _, (k, s) in sorted(first.items())], axis=1)
for (k, s) in [(1, 0), (5, 2)]:                  # windows that repeat are the same bits
    jj = int(j[k, s]); k2, s2 = first[jj]
    assert (x[:, k, s] == x[:, k2, s2]).all()
def run(name, a):
    raw = comp = 0; t = 0.0
    for c in a.reshape(16, -1):
        b = c.view(np.uint8).reshape(-1, 2).T.copy().tobytes()   # shuffle
        t0 = time.perf_counter(); z = zlib.compress(b, 1); t += time.perf_counter() - t0
        raw += len(b); comp += len(z)
    print(f"{name:28s} {raw/1e6:6.2f} MB -> {comp/1e6:6.2f} MB ({x.nbytes/comp:.2f}x smaller than the full layout raw), zlib-1 {t*1e3:.0f} ms")
run("full [79,3,32,5]", x)
run("distinct [159,32,5]", distinct)

# Each byte plane of the full layout alone: LZ matching (level 1) against entropy coding
# only (Huffman), to see where deflate's gain comes from.
def plane(name, a, which):
    raw = lz = huff = 0
    for c in a.reshape(16, -1):
        b = c.view(np.uint8).reshape(-1, 2)[:, which].tobytes()
        raw += len(b); lz += len(zlib.compress(b, 1))
        h = zlib.compressobj(1, zlib.DEFLATED, 15, 9, zlib.Z_HUFFMAN_ONLY)
        huff += len(h.compress(b) + h.flush())
    print(f"{name:28s} {raw/1e6:6.2f} MB: LZ + Huffman {raw/lz:.2f}x, Huffman only {raw/huff:.2f}x")
plane("full, low bytes (mantissa)", x, 0)
plane("full, high bytes", x, 1)
plane("distinct, low bytes", distinct, 0)
plane("distinct, high bytes", distinct, 1)
