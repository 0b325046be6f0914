// The model directory's pair rule (see model_files.h).
#include "engine/model_files.h"

#include <cstdio>
#include <cstring>
#include <string>

#include "core/common_internal.h"
#include "gguf.h"

namespace kz {

namespace {

const char CHECKPOINT_KEY[] = "kazetts.checkpoint_sha256";
const char CONFIG_KEY[] = "kazetts.source_sha256.config.json";
const char MODEL_TYPE_KEY[] = "kazetts.model_type";

// Whether the file starts as a GGUF does (else gguf_init_from_file would log its complaint).
bool looks_like_gguf(const char *path) {
    char magic[4] = {};
    FILE *f = std::fopen(path, "rb");
    if (!f) return false;
    const bool ok = std::fread(magic, 1, 4, f) == 4 && std::memcmp(magic, "GGUF", 4) == 0;
    std::fclose(f);
    return ok;
}

// What a file says of the checkpoint it was converted from ("" where it says nothing).
struct Identity {
    std::string name, model_type, checkpoint, config;
    bool readable = false;

    explicit Identity(const char *path) {
        gguf_init_params params{true, nullptr};
        gguf_context *g = looks_like_gguf(path) ? parse_gguf_quietly(path, params) : nullptr;
        if (!g) return;
        auto text = [g](const char *key) {
            const int64_t id = gguf_find_key(g, key);
            return id >= 0 && gguf_get_kv_type(g, id) == GGUF_TYPE_STRING ? std::string(gguf_get_val_str(g, id))
                                                                          : std::string();
        };
        name = text("general.name"), model_type = text(MODEL_TYPE_KEY);
        checkpoint = text(CHECKPOINT_KEY), config = text(CONFIG_KEY);
        readable = true;
        gguf_free(g);
    }

    std::string describe() const {
        std::string s = model_type.empty() ? "a model" : "a " + model_type + " model";
        if (!name.empty()) s += " named '" + name + "'";
        if (!checkpoint.empty()) {
            s += " (checkpoint " + checkpoint.substr(0, 12) + ")";
        } else if (!config.empty()) {
            s += " (config.json " + config.substr(0, 12) + ")";  // a file converted before the fingerprint
        }
        return s;
    }
};

// Both say it and they disagree.
bool differ(const std::string &a, const std::string &b) { return !a.empty() && !b.empty() && a != b; }

}  // namespace

void check_model_files(const char *talker_path, const char *mmproj_path) {
    const Identity talker(talker_path), mmproj(mmproj_path);
    if (!talker.readable || !mmproj.readable) return;
    const bool same_checkpoint = !talker.checkpoint.empty() && !mmproj.checkpoint.empty()
                                     ? talker.checkpoint == mmproj.checkpoint
                                     : !differ(talker.config, mmproj.config);
    if (same_checkpoint && !differ(talker.model_type, mmproj.model_type)) return;
    throw Error(KZ_ERR_FORMAT, std::string("the talker and the mmproj come from two different checkpoints: ") +
                                   talker_path + " is " + talker.describe() + ", " + mmproj_path + " is " +
                                   mmproj.describe() + "; use the two files of one checkpoint");
}

}  // namespace kz
