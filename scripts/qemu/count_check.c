/* A program whose instruction counts are known, for checking the counting plugin
 * (scripts/qemu/kzcount.c) exactly: scripts/aarch64_count.py --self-check runs it under
 * qemu-aarch64 and compares kzcount's counts with EXPECTED below.
 *
 * It marks a request (stage 1) holding a prefill (stage 2) of 100 turns of a 4-instruction loop
 * and then a talker step (stage 3) of 1000 turns of a 5-instruction loop, each loop one SIMD & FP
 * instruction and one load a turn. A mark's own instruction goes to the stage on top before it. */
#include <stdio.h>

int main(void) {
    float scratch[4] = {0};
#if defined(__aarch64__)
    __asm__ __volatile__(
        "hint #98\n"  /* request begins (charged to outside) */
        "hint #100\n" /* prefill begins (charged to the request's set-up) */
        "mov x9, #100\n"
        "1: fmla v0.4s, v1.4s, v1.4s\n"
        "ldr q2, [%0]\n"
        "subs x9, x9, #1\n"
        "b.ne 1b\n"
        "hint #101\n" /* prefill ends (charged to it) */
        "hint #102\n" /* talker begins (charged to the request) */
        "mov x9, #1000\n"
        "2: fmla v0.4s, v1.4s, v1.4s\n"
        "ldr q2, [%0]\n"
        "add x10, x10, #1\n"
        "subs x9, x9, #1\n"
        "b.ne 2b\n"
        "hint #103\n" /* talker ends (charged to it) */
        "hint #99\n"  /* request ends (charged to it) */
        :
        : "r"(scratch)
        : "x9", "x10", "v0", "v1", "v2", "memory", "cc");
#endif
    puts("EXPECTED setup 1 0 0, request 2 0 0, prefill 402 100 100, talker 5002 1000 1000");
    return 0;
}
