// The host harness of mel_cuda::emu: reads the kernel's arguments from files in a
// folder, runs every block of the grid under cuda_emu.h, checks the canaries, and
// writes the output. Compiled together with one kernel source (kernel.cu, its plan's
// macros prepended) and EMU_KERNEL_F32 defined for mel_f32.cu.
//
//   emu DIR N_CLIPS SHARED_BYTES OUT_BYTES forward|reverse
//
// DIR holds clips.bin (f32), window.bin and twiddle.bin (f64 for mel.cu; f32 pairs and
// quads for mel_f32.cu), offsets.bin, map_start.bin, map_out.bin, f_start.bin,
// f_len.bin, f_off.bin (i32), f_w.bin (f32), segs_per_clip.bin (one i32); out.bin is
// written there.
#include "cuda_emu.h"

#include <sys/mman.h>
#include <unistd.h>

#include <fstream>
#include <string>

// Shared memory of the block being run (the kernel's `extern __shared__` array: `smem`
// in mel.cu, `smem4` in mel_f32.cu), with room after it for a canary.
constexpr size_t SMEM_BYTES = 256 * 1024;
#ifdef EMU_KERNEL_F32
alignas(16) float4 smem4[SMEM_BYTES / 16];
static unsigned char *const SHARED = (unsigned char *)smem4;
#else
alignas(16) double smem[SMEM_BYTES / 8];
static unsigned char *const SHARED = (unsigned char *)smem;
#endif

#include "kernel.cu"

namespace {

std::vector<char> read_file(const std::string &path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) {
        std::fprintf(stderr, "cuda_emu: cannot read %s\n", path.c_str());
        std::exit(2);
    }
    return std::vector<char>((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

// `bytes` of `data` in pages of their own, with an inaccessible page after them: a read
// past the end faults instead of passing silently.
template <typename T>
const T *guarded(const std::vector<char> &data) {
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    const size_t body = (data.size() + page - 1) / page * page;
    char *base = (char *)mmap(nullptr, body + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED) {
        std::perror("mmap");
        std::exit(2);
    }
    // Data ends exactly at the guard page.
    char *start = base + (body - data.size());
    std::memcpy(start, data.data(), data.size());
    mprotect(base + body, page, PROT_NONE);
    return (const T *)start;
}

}  // namespace

int main(int argc, char **argv) {
    if (argc != 6) {
        std::fprintf(stderr, "usage: emu DIR N_CLIPS SHARED_BYTES OUT_BYTES forward|reverse\n");
        return 2;
    }
    const std::string dir = argv[1];
    const int n_clips = std::atoi(argv[2]);
    const size_t shared = (size_t)std::atoll(argv[3]);
    const size_t out_bytes = (size_t)std::atoll(argv[4]);
    const bool reverse = std::string(argv[5]) == "reverse";
    if (shared + 4096 > SMEM_BYTES) {
        std::fprintf(stderr, "cuda_emu: %zu bytes of shared memory is more than the emulator has\n", shared);
        return 2;
    }
    auto file = [&](const char *name) { return read_file(dir + "/" + name); };
    const float *clips = guarded<float>(file("clips.bin"));
    auto window = file("window.bin"), twiddle = file("twiddle.bin");
    auto offsets = file("offsets.bin"), map_start = file("map_start.bin"), map_out = file("map_out.bin");
    auto f_start = file("f_start.bin"), f_len = file("f_len.bin"), f_off = file("f_off.bin");
    auto f_w = file("f_w.bin"), spc = file("segs_per_clip.bin");
    int segs_per_clip;
    std::memcpy(&segs_per_clip, spc.data(), 4);

    const size_t canary = 4096;
    std::vector<unsigned char> out(out_bytes + canary, 0xa5);
    const long segments = (long)n_clips * N_DISTINCT;
    const unsigned blocks = (unsigned)((segments + SEGS - 1) / SEGS);
    for (unsigned b = 0; b < blocks; b++) {
        // Shared memory starts as NaN (0xff bytes) in every block; a canary follows it.
        std::memset(SHARED, 0xff, shared);
        std::memset(SHARED + shared, 0x5a, canary);
        emu::run_block(b, WARPS * 32, reverse, [&] {
#ifdef EMU_KERNEL_F32
            mel_kernel_f32(clips, n_clips, out.data(), (const float2 *)window.data(),
                           (const float4 *)twiddle.data(), (const int *)offsets.data(),
                           (const int *)map_start.data(), (const int *)map_out.data(), segs_per_clip,
                           (const int *)f_start.data(), (const int *)f_len.data(), (const int *)f_off.data(),
                           (const float *)f_w.data());
#else
            mel_kernel(clips, n_clips, out.data(), (const double *)window.data(), (const double *)twiddle.data(),
                       (const int *)offsets.data(), (const int *)map_start.data(), (const int *)map_out.data(),
                       segs_per_clip, (const int *)f_start.data(), (const int *)f_len.data(),
                       (const int *)f_off.data(), (const float *)f_w.data());
#endif
        });
        for (size_t i = 0; i < canary; i++) {
            if (SHARED[shared + i] != 0x5a) {
                std::fprintf(stderr, "cuda_emu: block %u wrote past its %zu bytes of shared memory\n", b, shared);
                return 4;
            }
        }
    }
    for (size_t i = 0; i < canary; i++) {
        if (out[out_bytes + i] != 0xa5) {
            std::fprintf(stderr, "cuda_emu: the kernel wrote past its %zu bytes of output\n", out_bytes);
            return 4;
        }
    }
    std::ofstream o(dir + "/out.bin", std::ios::binary);
    o.write((const char *)out.data(), (std::streamsize)out_bytes);
    return o ? 0 : 2;
}
