// A model directory's two files, talker and mmproj, must come from one checkpoint: every
// 0.6B (or 1.7B) model has the same shapes, so widths alone let a CustomVoice talker speak
// through a Base model's code predictor. As kazetts/engine/model_files.py, which calls this
// rule through kz_model_files_check (kazetts/rules.h).
#pragma once

namespace kz {

// Throws kz::Error (KZ_ERR_FORMAT) naming both files and what differs when they carry
// identities that disagree: the checkpoint fingerprint `kazetts convert` writes into both
// (kazetts.checkpoint_sha256; older files: the sha256 of the source's config.json), the model
// type. Files without them (made by llama.cpp's converter) and files that are not GGUF pass:
// their widths are checked when the stages load, their format by the loaders.
void check_model_files(const char *talker_path, const char *mmproj_path);

}  // namespace kz
