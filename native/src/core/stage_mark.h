// Stage marks: where a counter that reads the instruction stream sees a stage of the frame loop
// begin and end (scripts/qemu/kzcount.c, a qemu plugin run by scripts/aarch64_count.py, counts the
// instructions of each stage under qemu-aarch64). On aarch64 a mark is one `hint #N` instruction of
// a number no ARMv8/v9 core gives a meaning to (96..127), which every core executes as a NOP; on
// other architectures nothing. Marks form a stack on one thread: with the codec on a worker thread
// of its own (codec_threads > 0) the counts are not meaningful. The numbers are kzcount.c's
// (KZ_MARK_BASE + 2 * stage to begin, + 1 to end) and scripts/aarch64_count.py's.
// Internal (not part of the C ABI).
#pragma once

namespace kz {

enum Stage {
    STAGE_REQUEST = 1,  // a whole request (marked by the program that calls the engine)
    STAGE_PREFILL = 2,  // the talker on a prompt
    STAGE_TALKER = 3,   // a talker decoding step
    STAGE_CODE_PREDICTOR = 4,
    STAGE_CODEC = 5,
};

// Marks a scope as a stage: begins where it is constructed, ends where it is destroyed (also
// when an exception leaves the scope).
template <int S>
struct StageMark {
    static_assert(S >= 0 && S < 16, "16 stages");
#if defined(__aarch64__)
    StageMark() { __asm__ __volatile__("hint %0" ::"i"(96 + 2 * S) : "memory"); }
    ~StageMark() { __asm__ __volatile__("hint %0" ::"i"(97 + 2 * S) : "memory"); }
#else
    StageMark() {}
    ~StageMark() {}
#endif
    StageMark(const StageMark &) = delete;
    StageMark &operator=(const StageMark &) = delete;
};

}  // namespace kz
