/* kzcount: a qemu TCG plugin that counts the guest instructions executed per stage of a program
 * (qemu-user 7.2's plugin API, include/qemu/qemu-plugin.h; built by scripts/qemu_plugin.sh).
 *
 *   qemu-aarch64 -plugin build/qemu-plugin/libkzcount.so,out=COUNTS.json[,bytes=on] PROGRAM ...
 *
 * Stages are marked in the guest code by `hint #N` instructions (N = KZ_MARK_BASE + 2 * stage:
 * the stage begins, + 1: it ends), numbers no ARMv8/v9 core gives a meaning to, so every core
 * (and qemu) executes them as NOPs (native/src/core/stage_mark.h; scripts/qemu/llama_tts_stages.c
 * for llama-tts). A begin pushes the stage on a stack, an end pops it; instructions are charged
 * to the stage on top (stage 0, "outside", at the bottom). Counting: every translation block
 * adds its instruction count to one counter when it starts (an inline op, no call), and a mark
 * (a callback on the hint only) charges the counter's progress since the last mark to the stage
 * that was on top, less the block's instructions after the hint. So the cost is one add per block
 * plus one call per mark, and the counts are exact to the instruction for one guest thread.
 * Two classes are counted alike beside all instructions, by the A64 encoding's op0 field: SIMD &
 * FP data processing (what a core's vector pipes issue) and loads / stores (its memory pipes).
 *
 * Stage 1 ("request") is split in two: before the first end of stage 2 ("prefill") its
 * instructions go to the slot KZ_SETUP (the request's set-up: text, prompt, speaker), after it to
 * stage 1 (the glue of the frame loop). With bytes=on every memory access also adds its size to
 * the top stage's bytes read or written (a callback per access: several times slower).
 *
 * At exit it writes one JSON object to `out` (stderr without it): per stage its instructions
 * (all, SIMD & FP, loads / stores), begins, bytes read and written; the guest threads seen (the
 * counts are exact for one: inline adds are not atomic), mark errors (an end that does not match
 * the top, a stack overflow) and the stack depth at exit. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <qemu-plugin.h>

QEMU_PLUGIN_EXPORT int qemu_plugin_version = QEMU_PLUGIN_VERSION;

enum {
    KZ_MARK_BASE = 96,    /* hint #96 .. #127 */
    KZ_STAGES = 16,       /* marks of stages 0..15 */
    KZ_SETUP = KZ_STAGES, /* the request's instructions before the first end of the prefill */
    KZ_SLOTS = KZ_STAGES + 1,
    KZ_REQUEST = 1,
    KZ_PREFILL = 2,
    KZ_MAX_DEPTH = 64,
};
#define HINT_MASK 0xfffff01fu /* HINT #imm: 0xd503201f | imm << 5 (imm 7 bits) */
#define HINT_OPCODE 0xd503201fu

enum { CLASS_ALL, CLASS_SIMD, CLASS_MEMORY, CLASSES }; /* what is counted of the instructions */
static uint64_t executed[CLASSES];                     /* instructions of the blocks started so far */
static uint64_t charged[CLASSES];                      /* `executed` at the last mark */
static uint64_t insns[KZ_SLOTS][CLASSES], begins[KZ_SLOTS], bytes_read[KZ_SLOTS], bytes_written[KZ_SLOTS];
static int stack[KZ_MAX_DEPTH], depth = 1; /* stack[0] = 0: outside */
static int top;                            /* the slot charged now */
static int prefill_done;
static uint64_t mark_errors, vcpus;
static int count_bytes;
static const char *out_path;

static int slot_of_top(void) {
    const int s = stack[depth - 1];
    return s == KZ_REQUEST && !prefill_done ? KZ_SETUP : s;
}

/* A mark's udata: the hint's number - KZ_MARK_BASE in bits 0..7, then per class (16 bits each,
 * from bit 8) the block's instructions of that class after the hint. */
static void charge(uint64_t udata) {
    for (int c = 0; c < CLASSES; ++c) {
        const uint64_t now = executed[c] - ((udata >> (8 + 16 * c)) & 0xffff);
        insns[top][c] += now - charged[c];
        charged[c] = now;
    }
}

static void on_mark(unsigned int vcpu_index, void *udata) {
    const uint64_t u = (uint64_t)(uintptr_t)udata;
    const unsigned code = (unsigned)(u & 0xff);
    const int stage = (int)(code >> 1);
    charge(u);
    if ((code & 1) == 0) {
        if (depth == KZ_MAX_DEPTH) {
            ++mark_errors;
        } else {
            stack[depth++] = stage;
            ++begins[stage];
        }
    } else if (depth > 1 && stack[depth - 1] == stage) {
        --depth;
        if (stage == KZ_PREFILL) prefill_done = 1;
    } else {
        ++mark_errors;
    }
    top = slot_of_top();
}

static void on_mem(unsigned int vcpu_index, qemu_plugin_meminfo_t info, uint64_t vaddr, void *udata) {
    const uint64_t size = 1u << qemu_plugin_mem_size_shift(info);
    if (qemu_plugin_mem_is_store(info))
        bytes_written[top] += size;
    else
        bytes_read[top] += size;
}

/* The classes an instruction counts in, by the A64 encoding's op0 (bits 28..25): x111 SIMD & FP
 * data processing, x1x0 loads and stores (SIMD ones included). */
static unsigned classes_of(uint32_t word) {
    const unsigned op0 = (word >> 25) & 0xf;
    return 1u << CLASS_ALL | ((op0 & 0x7) == 0x7) << CLASS_SIMD | ((op0 & 0x5) == 0x4) << CLASS_MEMORY;
}

static void on_translate(qemu_plugin_id_t id, struct qemu_plugin_tb *tb) {
    const size_t n = qemu_plugin_tb_n_insns(tb);
    uint32_t words[n > 0 ? n : 1];
    uint64_t after[CLASSES] = {0}; /* of the block's instructions after the one at hand */
    for (size_t i = 0; i < n; ++i) {
        struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
        words[i] = 0;
        if (qemu_plugin_insn_size(insn) == 4) memcpy(&words[i], qemu_plugin_insn_data(insn), 4);
        for (int c = 0; c < CLASSES; ++c) after[c] += classes_of(words[i]) >> c & 1;
    }
    for (int c = 0; c < CLASSES; ++c)
        if (after[c]) qemu_plugin_register_vcpu_tb_exec_inline(tb, QEMU_PLUGIN_INLINE_ADD_U64, &executed[c], after[c]);
    for (size_t i = 0; i < n; ++i) {
        struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
        for (int c = 0; c < CLASSES; ++c) after[c] -= classes_of(words[i]) >> c & 1;
        if (count_bytes)
            qemu_plugin_register_vcpu_mem_cb(insn, on_mem, QEMU_PLUGIN_CB_NO_REGS, QEMU_PLUGIN_MEM_RW, NULL);
        if ((words[i] & HINT_MASK) != HINT_OPCODE) continue;
        const unsigned imm = (words[i] >> 5) & 0x7f;
        if (imm < KZ_MARK_BASE) continue; /* a real hint (NOP, YIELD, BTI, PAC...) */
        uint64_t udata = imm - KZ_MARK_BASE;
        for (int c = 0; c < CLASSES; ++c) udata |= after[c] << (8 + 16 * c);
        qemu_plugin_register_vcpu_insn_exec_cb(insn, on_mark, QEMU_PLUGIN_CB_NO_REGS, (void *)(uintptr_t)udata);
    }
}

static void on_vcpu_init(qemu_plugin_id_t id, unsigned int vcpu_index) { ++vcpus; }

static void on_atexit(qemu_plugin_id_t id, void *p) {
    charge(0);
    FILE *f = out_path ? fopen(out_path, "w") : stderr;
    if (!f) {
        fprintf(stderr, "kzcount: cannot write %s\n", out_path);
        return;
    }
    fprintf(f, "{\"threads\": %" PRIu64 ", \"mark_errors\": %" PRIu64 ", \"depth_at_exit\": %d, \"bytes\": %s,\n",
            vcpus, mark_errors, depth - 1, count_bytes ? "true" : "false");
    fprintf(f, " \"total\": %" PRIu64 ", \"slots\": [\n", executed[CLASS_ALL]);
    for (int s = 0; s < KZ_SLOTS; ++s)
        fprintf(f,
                "  {\"slot\": %d, \"insns\": %" PRIu64 ", \"simd_fp\": %" PRIu64 ", \"loads_stores\": %" PRIu64
                ", \"begins\": %" PRIu64 ", \"bytes_read\": %" PRIu64 ", \"bytes_written\": %" PRIu64 "}%s\n",
                s, insns[s][CLASS_ALL], insns[s][CLASS_SIMD], insns[s][CLASS_MEMORY], begins[s], bytes_read[s],
                bytes_written[s], s + 1 < KZ_SLOTS ? "," : "");
    fprintf(f, "]}\n");
    if (f != stderr) fclose(f);
}

QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc, char **argv) {
    for (int i = 0; i < argc; ++i) {
        const char *arg = argv[i], *eq = strchr(arg, '=');
        if (eq && strncmp(arg, "out=", 4) == 0) {
            out_path = eq + 1;
        } else if (eq && strncmp(arg, "bytes=", 6) == 0) {
            bool on = false;
            if (!qemu_plugin_bool_parse("bytes", eq + 1, &on)) {
                fprintf(stderr, "kzcount: bytes=on|off, not %s\n", eq + 1);
                return -1;
            }
            count_bytes = on;
        } else {
            fprintf(stderr, "kzcount: unknown argument %s (out=FILE, bytes=on|off)\n", arg);
            return -1;
        }
    }
    if (strcmp(info->target_name, "aarch64") != 0) {
        fprintf(stderr, "kzcount: the marks are aarch64 hints; target %s\n", info->target_name);
        return -1;
    }
    qemu_plugin_register_vcpu_init_cb(id, on_vcpu_init);
    qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate);
    qemu_plugin_register_atexit_cb(id, on_atexit, NULL);
    return 0;
}
