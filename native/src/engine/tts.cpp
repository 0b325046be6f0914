// The TTS engine behind kazetts/tts.h: checks a request and builds every piece's prompt, then
// runs the frame loop of kazetts/engine/talker_loop.py and the streaming of
// kazetts/engine/tts.py (first frame alone, then chunk_frames per codec push, pieces joined
// with a crossfade). Same order of random draws as the Python engine: per sampled frame one
// uniform for CB0, then the code predictor's 15, all from one splitmix64 state. With
// codec_threads the codec pushes run on a worker thread (CodecPipeline), in the same order and
// with the same chunks, while this thread makes the next frames.
#include "kazetts/tts.h"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "core/common_internal.h"
#include "core/stage_mark.h"
#include "engine/batcher.h"
#include "engine/enroll.h"
#include "engine/joiner.h"
#include "engine/model_files.h"
#include "engine/rules.h"
#include "engine/text_split.h"
#include "engine/text_stream.h"
#include "engine/time_stretch.h"
#include "kazetts/code_predictor.h"
#include "kazetts/codec.h"
#include "kazetts/speaker_encoder.h"
#include "kazetts/voice.h"
#include "stages/prompt.h"
#include "stages/sampling.h"
#include "stages/talker.h"
#include "stages/talker_file.h"

namespace {

const int N_CODEBOOKS = 16;
const size_t PIECE_CHARS = 300;        // pieces of long text, in code points
const size_t MAX_TEXT_CHARS = 100000;  // one request's text, in code points (kazetts.request.MAX_TEXT_CHARS)

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

std::string str(const char *s) { return s ? s : ""; }

// One piece of the request, ready to run.
struct Piece {
    kz::Prompt prompt;
    int budget;
};

// What a request clones from (kz_tts_request.voice): the x-vector and, for ICL, the reference's
// transcript ids, the talker input rows of its frames and its codes (which prime the codec).
struct Clone {
    std::vector<float> xvector;
    bool icl = false;
    std::vector<int32_t> ref_text_ids, ref_codes;
    std::vector<float> ref_frames;
};

const char *const NO_REFERENCE_CODES =
    "this mmproj has no codec encoder (llama.cpp's converter does not write it; `kazetts convert` "
    "does): ICL cloning needs the reference's codec codes; use xvector_only=True";

// One codec push: the frames' codes in, their audio (or the codec's error) out.
struct CodecJob {
    std::vector<int32_t> codes;
    std::vector<float> audio;
    int status = KZ_OK;
    std::string error;
    double ms = 0;
};

// A request's codec pushes on its own codec stream, decoded in the order they were pushed: at once
// on the batcher's thread (serial), or by one worker thread while the caller makes the next frames
// (overlap). Either way the caller takes the decoded jobs back in order with pop() and delivers
// them itself, so the callbacks stay on its thread. Two ggml computations from two host threads
// are safe with the shipped ggml: each compute makes its own threadpool state and OpenMP team,
// and the codec and the talker / code predictor own separate backends and buffers.
class CodecPipeline {
  public:
    CodecPipeline(kz_codec_stream *codec, int samples_per_frame, bool overlap, kz::Batcher &batcher)
        : codec_(codec), samples_per_frame_(samples_per_frame), batcher_(batcher) {
        if (overlap) worker_ = std::thread([this] { work(); });
    }
    ~CodecPipeline() {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            stop_ = true;
            todo_.clear();
        }
        changed_.notify_all();
        if (worker_.joinable()) worker_.join();
    }
    CodecPipeline(const CodecPipeline &) = delete;
    CodecPipeline &operator=(const CodecPipeline &) = delete;

    void push(std::vector<int32_t> codes) {
        std::unique_ptr<CodecJob> job(new CodecJob());
        job->codes = std::move(codes);
        if (!worker_.joinable()) {
            batcher_.solo([&] { decode(*job); });
            done_.push_back(std::move(job));
            return;
        }
        {
            std::lock_guard<std::mutex> lock(mutex_);
            todo_.push_back(std::move(job));
        }
        changed_.notify_all();
    }

    // The oldest pushed job once decoded (wait: blocks until it is); null when none is decoded yet
    // (or none is pending).
    std::unique_ptr<CodecJob> pop(bool wait) {
        std::unique_lock<std::mutex> lock(mutex_);
        if (wait) changed_.wait(lock, [this] { return !done_.empty() || (todo_.empty() && !running_); });
        if (done_.empty()) return nullptr;
        std::unique_ptr<CodecJob> job = std::move(done_.front());
        done_.pop_front();
        return job;
    }

    // Drops the jobs not delivered yet, after the one being decoded (if any) ends: the codec is
    // then idle and may be reset.
    void discard() {
        std::unique_lock<std::mutex> lock(mutex_);
        todo_.clear();
        changed_.wait(lock, [this] { return !running_; });
        done_.clear();
    }

  private:
    void decode(CodecJob &job) {
        const int n = int(job.codes.size() / N_CODEBOOKS);
        job.audio.resize(size_t(n) * size_t(samples_per_frame_));
        size_t written = 0;
        const auto t = Clock::now();
        {
            kz::StageMark<kz::STAGE_CODEC> mark;
            job.status = kz_codec_stream_decode(codec_, job.codes.data(), n, N_CODEBOOKS, job.audio.data(),
                                                job.audio.size(), &written);
        }
        job.ms = ms_since(t);
        if (job.status != KZ_OK) job.error = kz_codec_stream_last_error(codec_);
        job.audio.resize(job.status == KZ_OK ? written : 0);
    }

    void work() {
        std::unique_lock<std::mutex> lock(mutex_);
        for (;;) {
            changed_.wait(lock, [this] { return stop_ || !todo_.empty(); });
            if (stop_) return;
            std::unique_ptr<CodecJob> job = std::move(todo_.front());
            todo_.pop_front();
            running_ = true;
            lock.unlock();
            decode(*job);
            lock.lock();
            running_ = false;
            done_.push_back(std::move(job));
            changed_.notify_all();
        }
    }

    kz_codec_stream *codec_;
    const int samples_per_frame_;
    kz::Batcher &batcher_;
    std::mutex mutex_;
    std::condition_variable changed_;
    std::deque<std::unique_ptr<CodecJob>> todo_, done_;
    bool running_ = false, stop_ = false;
    std::thread worker_;
};

// The CPUs this process may run on (its affinity mask; all online CPUs where that is unknown).
int available_cores() {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) return CPU_COUNT(&set);
    const unsigned n = std::thread::hardware_concurrency();
    return n ? int(n) : 1;
}

// What the frame loop (kz_tts::run) says, piece by piece: the pieces of a whole text, or of a
// text still arriving (TextStreamSource), whose text rows may wait for text.
class PieceSource {
  public:
    virtual ~PieceSource() = default;
    // Moves to the next piece; false when nothing is left to say (or the request was cancelled
    // while waiting for text).
    virtual bool next() = 0;
    virtual const kz::Prompt &prompt() const = 0;
    // The frames the talker makes room for (the piece's budget when it is known in advance).
    virtual int room() const = 0;
    // The text row of generated step `frame`; null when cancelled while waiting for its text.
    virtual const float *text_row(size_t frame) = 0;
    // Whether text_row(frame) answers without waiting for text.
    virtual bool ready(size_t frame) const = 0;
    // Whether the piece reached its budget after `produced` frames, once that is known (a piece
    // whose budget is its room ends there instead).
    virtual bool over(int produced) = 0;
    // Whether the current piece is known to be the request's last (the joiner lets it through).
    virtual bool last_piece() const = 0;
};

// The pieces of a whole text, planned before any compute.
class TextSource : public PieceSource {
  public:
    explicit TextSource(const std::vector<Piece> &pieces) : pieces_(pieces) {}
    bool next() override { return ++index_ < pieces_.size(); }
    const kz::Prompt &prompt() const override { return pieces_[index_].prompt; }
    int room() const override { return pieces_[index_].budget; }
    const float *text_row(size_t frame) override { return prompt().text_row(frame); }
    bool ready(size_t) const override { return true; }
    bool over(int) override { return false; }
    bool last_piece() const override { return index_ + 1 == pieces_.size(); }

  private:
    const std::vector<Piece> &pieces_;
    size_t index_ = size_t(-1);
};

}  // namespace

// A request being said: its seat among those said at once (kz_tts_params.max_batch) and what is
// its own there: its talker sequence, codec stream, cancel flag, ICL reference codes and codes.
struct Lane {
    int slot = 0;                      // the talker sequence
    kz_codec_stream *codec = nullptr;  // on kz_tts::codec's weights
    bool taken = false;                // (kz_tts::lanes_mutex)
    std::atomic<bool> cancelled{false};
    std::vector<int32_t> prime_codes;  // the request's ICL reference codes (none: not ICL)
    std::vector<int32_t> codes;        // the frames delivered so far
    std::function<void()> wake;        // a text stream's worker waiting for text (kz_tts::lanes_mutex)

    ~Lane() { kz_codec_stream_free(codec); }
};

struct kz_tts {
    std::unique_ptr<kz::TalkerFile> file;
    std::unique_ptr<kz::Talker> talker;
    kz_code_predictor *cp = nullptr;
    kz_codec *codec = nullptr;
    std::unique_ptr<kz::Batcher> batcher;      // the talker and code predictor, shared by the lanes
    std::vector<std::unique_ptr<Lane>> lanes;  // max_batch of them
    mutable std::mutex lanes_mutex;            // guards the lanes' taken and wake, last_codes and the queue
    std::condition_variable seat_freed;        // a lane left, or kz_tts_cancel
    int queue = 0;                             // requests that may wait for a seat (kz_tts_params.queue)
    std::deque<uint64_t> waiting;              // their tickets, in arrival order
    uint64_t next_ticket = 0, cancels = 0;     // (cancels: kz_tts_cancel calls so far)
    int sample_rate = 0, samples_per_frame = 0;
    bool overlap = false;  // codec_threads > 0: the codec decodes on a worker thread
    std::string info;
    std::vector<int32_t> last_codes;  // those of the last request that ended
    std::string mmproj_path;
    std::mutex model_mutex;              // guards what follows: loaded or computed on first use
    std::string speaker_encoder_sha256;  // the digest once a voice asked for it
    // kz_tts_enroll's encoders, loaded on its first call, and the threads they run on
    kz_speaker_encoder *speaker_encoder = nullptr;
    kz_codec_encoder *codec_encoder = nullptr;
    int n_threads = 1;

    ~kz_tts() {
        lanes.clear();  // (their codec streams before the codec)
        batcher.reset();
        kz_cp_free(cp);
        kz_codec_free(codec);
        kz_speaker_encoder_free(speaker_encoder);
        kz_codec_encoder_free(codec_encoder);
    }

    // A free seat, its cancel flag and codes cleared; when all are taken, waits for one in arrival
    // order if fewer than `queue` wait. Null (and `why`) when refused or cancelled while waiting.
    Lane *take_lane(const char **why);
    void leave(Lane *lane);  // the request ended: its codes become last_codes, the seat is free
    std::vector<Piece> plan(const std::string &text, const kz_tts_request &r, Lane &lane);
    Clone clone(const kz_tts_request &r);
    void prime_codec(Lane &lane);
    // The frame loop over a request's pieces; returns the number of pieces said.
    int run(Lane &lane, PieceSource &pieces, const kz_tts_request &r, kz_tts_chunk_cb cb, void *user,
            kz_tts_result &res);
};

namespace {

using kz::Error;

void check_request(const kz_tts_request &r) {
    auto bad = [](const std::string &m) { throw Error(KZ_ERR_INVALID_ARGUMENT, m); };
    if (r.chunk_frames < 1) bad("chunk_frames must be >= 1, got " + std::to_string(r.chunk_frames));
    if (r.max_frames < 0)
        bad("max_frames must be >= 0 (0: a budget from the text), got " + std::to_string(r.max_frames));
    if (r.min_frames < 0) bad("min_frames must be >= 0, got " + std::to_string(r.min_frames));
    if (!(r.speed >= KZ_MIN_SPEED && r.speed <= KZ_MAX_SPEED)) {  // (NaN fails too)
        char shown[64];
        std::snprintf(shown, sizeof shown, "%g", double(r.speed));
        bad(std::string("speed must be within 0.25..4.0, got ") + shown);
    }
    if (r.xvector_len < 0 || (r.xvector_len > 0) != (r.xvector != nullptr)) bad("xvector and xvector_len disagree");
    // the ranges of kazetts.request's checks, greedy or not (a bad value is a bad request)
    auto positive = [](float v) { return v > 0.0f && std::isfinite(v); };
    if (!positive(r.repetition_penalty)) bad("repetition_penalty must be > 0");
    auto unit = [](float v) { return v > 0.0f && v <= 1.0f; };
    if (!positive(r.temperature)) bad("temperature must be > 0");
    if (!positive(r.cp_temperature)) bad("cp_temperature must be > 0");
    if (r.top_k < 0) bad("top_k must be >= 0 (0: off)");
    if (r.cp_top_k < 0) bad("cp_top_k must be >= 0 (0: off)");
    if (!unit(r.top_p)) bad("top_p must be in (0, 1]");
    if (!unit(r.cp_top_p)) bad("cp_top_p must be in (0, 1]");
}

bool blank(const std::u32string &s) {
    for (char32_t c : s) {
        if (!kz::is_space(c)) return false;
    }
    return true;
}

// Text pushed by the app (kz_tts_stream_push), taken by the stream's worker.
struct TextInbox {
    std::mutex mutex;
    std::condition_variable arrived;
    std::string partial;  // the first bytes of a code point the last push cut
    std::u32string text;  // decoded, not taken yet
    bool ended = false;
};

// The bytes of data that end on a whole code point (the rest waits for the next push); invalid
// UTF-8 is left in, for decode_utf8 to refuse.
size_t whole_code_points(const std::string &data) {
    const size_t n = data.size();
    for (size_t back = 1; back <= 4 && back <= n; ++back) {
        const unsigned char c = static_cast<unsigned char>(data[n - back]);
        if ((c & 0xC0) == 0x80) continue;  // a continuation byte
        const size_t need = c < 0xC0 || c >= 0xF8 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
        return need > back ? n - back : n;
    }
    return n;
}

// kazetts/engine/text_stream.py's TextPieces on the stream's worker: pulls text only when a
// token is needed and hands out each piece's committed tokens (the commit rule of
// engine/text_stream.h), waiting for text while the app writes it.
class StreamPieces {
  public:
    StreamPieces(const kz::Talker &talker, TextInbox &inbox, const std::atomic<bool> &cancelled)
        : talker_(talker), inbox_(inbox), cancelled_(cancelled) {}

    // Moves to the next piece and waits for its first token; false when nothing is left to say
    // or the request was cancelled while waiting.
    bool next_piece() {
        if (in_piece_) {
            while (!closed) {  // the frame loop may stop (a frame cap) before a piece's text has come
                if (!advance()) return false;
            }
            received_.erase(0, text_.size());
        }
        in_piece_ = true;
        tokens.clear(), closed = false, text_.clear(), fed_ = 0;
        for (;;) {
            update();
            if (!tokens.empty()) return true;
            if (closed) {  // a piece of whitespace only: skip it
                received_.erase(0, text_.size());
                closed = false, text_.clear();
            }
            if (ended_ && blank(received_)) return false;
            if (!ended_ && !pull()) return false;
        }
    }

    // Whether token(index) answers without waiting for text.
    bool ready(size_t index) const { return index < tokens.size() || closed; }

    // The current piece's text token `index`, waiting for text if needed: -1 past the piece's
    // end, -2 when cancelled while waiting.
    int32_t token(size_t index) {
        while (!ready(index)) {
            if (!advance()) return -2;
        }
        return index < tokens.size() ? tokens[index] : -1;
    }

    // The current piece's committed tokens in the chat wrapping (as build_prompt takes them).
    std::vector<int32_t> chat_ids() const {
        std::vector<int32_t> ids(head_);
        ids.insert(ids.end(), tokens.begin(), tokens.end());
        ids.insert(ids.end(), tail_.begin(), tail_.end());
        return ids;
    }

    std::vector<int32_t> tokens;  // committed text tokens of the current piece
    bool closed = false;          // the current piece's text is whole

  private:
    // Waits for more text (or its end); false when cancelled.
    bool pull() {
        std::unique_lock<std::mutex> lock(inbox_.mutex);
        inbox_.arrived.wait(lock, [this] { return !inbox_.text.empty() || inbox_.ended || cancelled_.load(); });
        if (cancelled_.load()) return false;
        received_ += inbox_.text;
        inbox_.text.clear();
        ended_ = inbox_.ended;
        return true;
    }

    bool advance() {
        if (!pull()) return false;
        update();
        return true;
    }

    void update() {
        if (closed) return;
        const size_t cut = kz::piece_end(received_, PIECE_CHARS, fed_, ended_);
        if (cut != std::u32string::npos) {
            text_ = received_.substr(0, cut);
            if (!blank(text_)) commit(text_, cut);
            closed = true;
            return;
        }
        const size_t b = kz::final_boundary(received_, PIECE_CHARS);
        if (b > fed_ && !blank(received_.substr(0, b))) commit(received_.substr(0, b), b);
    }

    void commit(const std::u32string &text, size_t chars) {
        const std::vector<int32_t> ids = talker_.tokenize(kz::chat_text(kz::encode_utf8(text)));
        const auto body = ids.begin() + kz::ROLE_TOKENS, end = ids.end() - kz::TAIL_TOKENS;
        head_.assign(ids.begin(), body), tail_.assign(end, ids.end());
        const std::vector<int32_t> now(body, end);
        if (now.size() < tokens.size() || !std::equal(tokens.begin(), tokens.end(), now.begin())) {
            throw Error(KZ_ERR_COMPUTE, "kazetts bug: committed text tokens changed at " + kz::encode_utf8(text));
        }
        tokens = now, fed_ = chars;
    }

    const kz::Talker &talker_;
    TextInbox &inbox_;
    const std::atomic<bool> &cancelled_;
    std::u32string received_;  // text of the current piece and after (earlier pieces are dropped)
    std::u32string text_;      // the current piece's text once closed
    std::vector<int32_t> head_, tail_;
    size_t fed_ = 0;  // code points of received_ the committed tokens cover
    bool ended_ = false, in_piece_ = false;
};

// The pieces of text streamed in (kazetts/engine/tts.py's _stream_text): each piece's prompt
// from the tokens committed when it starts, the rest of its text rows as they come (its first
// token in the prefill, then one per step, tts_eos once it has ended, tts_pad after), the talker
// given all the room the prompt leaves (or max_frames), and the piece's budget applied once its
// text is known.
class TextStreamSource : public PieceSource {
  public:
    TextStreamSource(const kz::TalkerFile &file, StreamPieces &pieces, const kz::PromptRequest &request, int max_frames,
                     int n_ctx)
        : file_(file), pieces_(pieces), request_(request), max_frames_(max_frames), n_ctx_(n_ctx) {}

    bool next() override {
        if (!pieces_.next_piece()) return false;
        prompt_ = kz::build_prompt(file_, file_.voices(), pieces_.chat_ids(), request_);
        const size_t H = size_t(prompt_.hidden);
        eos_row_.assign(prompt_.trailing.end() - long(H), prompt_.trailing.end());
        n_prefill_ = int64_t(prompt_.n_prefill());
        room_ = kz::frame_budget(0, max_frames_ ? max_frames_ : n_ctx_, n_prefill_, n_ctx_);
        if (room_ < 1)
            throw Error(KZ_ERR_INVALID_ARGUMENT, "text too long for the talker context of " + std::to_string(n_ctx_));
        budget_ = -1;
        return true;
    }
    const kz::Prompt &prompt() const override { return prompt_; }
    int room() const override { return room_; }
    const float *text_row(size_t frame) override {
        const int32_t token = pieces_.token(frame + 1);
        if (token == -2) return nullptr;
        if (token >= 0) {
            row_ = file_.text({token});
            return row_.data();
        }
        return frame + 1 == pieces_.tokens.size() ? eos_row_.data() : prompt_.tts_pad.data();
    }
    bool ready(size_t frame) const override { return pieces_.ready(frame + 1); }
    bool over(int produced) override {
        if (max_frames_ > 0 || !pieces_.closed) return false;
        if (budget_ < 0) {
            const int64_t n_ids = int64_t(pieces_.tokens.size()) + kz::ROLE_TOKENS + kz::TAIL_TOKENS;
            budget_ = kz::frame_budget(n_ids, 0, n_prefill_, n_ctx_);
        }
        return produced >= budget_;
    }
    bool last_piece() const override { return false; }

  private:
    const kz::TalkerFile &file_;
    StreamPieces &pieces_;
    const kz::PromptRequest &request_;
    const int max_frames_, n_ctx_;
    kz::Prompt prompt_;
    std::vector<float> eos_row_, row_;
    int64_t n_prefill_ = 0;
    int room_ = 0, budget_ = -1;
};

}  // namespace

std::vector<Piece> kz_tts::plan(const std::string &text, const kz_tts_request &r, Lane &lane) {
    check_request(r);
    const std::u32string chars = kz::decode_utf8(text);
    if (chars.size() > MAX_TEXT_CHARS) {
        throw Error(KZ_ERR_INVALID_ARGUMENT, "the text is " + std::to_string(chars.size()) +
                                                 " characters; one request takes at most " +
                                                 std::to_string(MAX_TEXT_CHARS) + ": split it into several requests");
    }
    if (chars.empty() || blank(chars)) throw Error(KZ_ERR_INVALID_ARGUMENT, "empty text: there is nothing to say");
    const std::string instruct = str(r.instruct);
    if (!instruct.empty()) kz::decode_utf8(instruct);
    const std::vector<int32_t> instruct_ids =
        instruct.empty() ? std::vector<int32_t>() : talker->tokenize(kz::instruct_text(instruct));
    kz::PromptRequest pr;
    pr.language = r.language && *r.language ? r.language : "auto";
    pr.speaker = str(r.speaker);
    pr.instruct_ids = instruct.empty() ? nullptr : &instruct_ids;
    const Clone c = clone(r);
    pr.xvector = r.voice ? c.xvector.data() : r.xvector;
    pr.xvector_len = r.voice ? int(c.xvector.size()) : r.xvector_len;
    pr.text_streaming = r.text_streaming != 0;
    kz::IclReference ref;
    ref.text_ids = &c.ref_text_ids, ref.frames = c.ref_frames.data();
    ref.n_frames = int(c.ref_codes.size() / N_CODEBOOKS), ref.frame_width = talker->hidden_size();
    std::vector<Piece> pieces;
    for (const std::u32string &piece : kz::split_text(chars, PIECE_CHARS)) {
        if (blank(piece)) continue;
        const std::vector<int32_t> ids = talker->tokenize(kz::chat_text(kz::encode_utf8(piece)));
        kz::Prompt prompt = c.icl ? kz::build_icl_prompt(*file, file->voices(), ids, ref, pr)
                                  : kz::build_prompt(*file, file->voices(), ids, pr);
        const int budget =
            kz::frame_budget(int64_t(ids.size()), r.max_frames, int64_t(prompt.n_prefill()), talker->n_ctx());
        if (budget < 1 && c.icl) {
            char seconds[32];
            std::snprintf(seconds, sizeof seconds, "%.1f", ref.n_frames * 0.08);
            throw Error(KZ_ERR_INVALID_ARGUMENT,
                        "the voice's reference is " + std::to_string(ref.n_frames) + " frames (" + seconds +
                            " s): with its text and this text it leaves no room in the talker context of " +
                            std::to_string(talker->n_ctx()) + "; enroll a shorter reference (3-10 s)");
        }
        if (budget < 1)
            throw Error(KZ_ERR_INVALID_ARGUMENT,
                        "text too long for the talker context of " + std::to_string(talker->n_ctx()));
        pieces.push_back({std::move(prompt), budget});
    }
    lane.prime_codes = c.icl ? c.ref_codes : std::vector<int32_t>();
    return pieces;
}

// The voice rules of kazetts.TTS._clone, in its order and words.
Clone kz_tts::clone(const kz_tts_request &r) {
    auto bad = [](const std::string &m) { throw Error(KZ_ERR_INVALID_ARGUMENT, m); };
    if (r.xvector_only < -1 || r.xvector_only > 1) bad("xvector_only must be -1 (auto), 0 or 1");
    Clone c;
    if (!r.voice) {
        if (r.xvector_only >= 0) bad("xvector_only needs a voice= or ref_audio= to clone");
        return c;
    }
    if (r.xvector || (r.speaker && *r.speaker)) {
        bad("a cloned voice replaces speaker= and xvector=: give only one of them");
    }
    const kz::VoiceTable &voices = file->voices();
    if (voices.model_type != "base") {
        bad("voice cloning needs a Base model; this is a " + voices.model_type +
            " model (it speaks with speaker= or instruct=)");
    }
    kz_voice_info v = kz_voice_default_info();
    if (kz_voice_get(r.voice, &v) != KZ_OK) bad("the voice is not a kz_voice of this library");
    std::string model_sha256;
    {
        std::lock_guard<std::mutex> lock(model_mutex);
        if (speaker_encoder_sha256.empty()) {
            char sha[65], err[1024];
            const int s = kz_speaker_encoder_fingerprint(mmproj_path.c_str(), sha, sizeof sha, err, sizeof err);
            if (s != KZ_OK) throw Error(s, err);
            speaker_encoder_sha256 = sha;
        }
        model_sha256 = speaker_encoder_sha256;
    }
    char err[1024];
    if (kz_voice_check_model(v.model_type, v.hidden_size, v.speaker_encoder_sha256, voices.model_type.c_str(),
                             file->hidden(), model_sha256.c_str(), "this voice", err, sizeof err) != KZ_OK) {
        bad(err);
    }
    c.xvector.assign(v.xvector, v.xvector + v.hidden_size);
    const bool has_text = v.ref_text && *v.ref_text;
    c.icl = r.xvector_only == 0 || (r.xvector_only < 0 && has_text);
    if (!c.icl) return c;
    if (!has_text) bad("ICL cloning (xvector_only=False) needs ref_text, the words said in the reference");
    if (!v.ref_codes) bad(NO_REFERENCE_CODES);
    c.ref_text_ids = talker->tokenize(kz::ref_chat_text(v.ref_text));
    c.ref_codes.assign(v.ref_codes, v.ref_codes + size_t(v.ref_frames) * N_CODEBOOKS);
    c.ref_frames.resize(size_t(v.ref_frames) * size_t(talker->hidden_size()));
    for (int32_t f = 0; f < v.ref_frames; ++f)
        batcher->embed_codes(&c.ref_codes[size_t(f) * N_CODEBOOKS],
                             &c.ref_frames[size_t(f) * size_t(talker->hidden_size())]);
    return c;
}

// ICL: the reference's frames streamed into the reset codec, their audio dropped, so that the
// piece's frames decode with the reference as left context (kazetts.engine.tts.prime_codec).
void kz_tts::prime_codec(Lane &lane) {
    const int n = int(lane.prime_codes.size() / N_CODEBOOKS);
    std::vector<float> dropped(size_t(n) * size_t(samples_per_frame));
    batcher->solo([&] {
        const int s = kz_codec_stream_decode(lane.codec, lane.prime_codes.data(), n, N_CODEBOOKS, dropped.data(),
                                             dropped.size(), nullptr);
        if (s != KZ_OK) throw Error(s, kz_codec_stream_last_error(lane.codec));
    });
}

Lane *kz_tts::take_lane(const char **why) {
    std::unique_lock<std::mutex> lock(lanes_mutex);
    auto free_lane = [this]() -> Lane * {
        for (auto &lane : lanes)
            if (!lane->taken) return lane.get();
        return nullptr;
    };
    if (!waiting.empty() || !free_lane()) {
        if (int(waiting.size()) >= queue) {
            *why = queue ? "the handle runs max_batch requests and `queue` more wait already (kz_tts_params)"
                         : "the handle runs max_batch requests already (kz_tts_params.max_batch)";
            return nullptr;
        }
        const uint64_t ticket = next_ticket++, cancelled_at = cancels;
        waiting.push_back(ticket);
        seat_freed.wait(lock, [&] { return cancels != cancelled_at || (waiting.front() == ticket && free_lane()); });
        waiting.erase(std::find(waiting.begin(), waiting.end(), ticket));
        seat_freed.notify_all();  // the next in line may take a seat too
        if (cancels != cancelled_at) {
            *why = "cancelled (kz_tts_cancel) while it waited for a seat";
            return nullptr;
        }
    }
    Lane *lane = free_lane();  // (there is one: none, and the request waited above)
    lane->taken = true;
    lane->cancelled.store(false);
    lane->codes.clear();
    return lane;
}

void kz_tts::leave(Lane *lane) {
    std::lock_guard<std::mutex> lock(lanes_mutex);
    last_codes = lane->codes;
    lane->wake = nullptr;
    lane->taken = false;
    seat_freed.notify_all();
}

int kz_tts::run(Lane &lane, PieceSource &pieces, const kz_tts_request &r, kz_tts_chunk_cb cb, void *user,
                kz_tts_result &res) {
    const auto start = Clock::now();
    uint64_t state = r.seed >= 0 ? uint64_t(r.seed) : (uint64_t(std::random_device{}()) << 32) ^ std::random_device{}();
    kz::TalkerSampler sampler(kz::talker_sampling(r), file->codec_vocab(), file->voices().codec_eos);
    kz_cp_sampling cps = kz_cp_default_sampling();
    cps.greedy = r.greedy != 0;
    cps.temperature = r.cp_temperature, cps.top_k = r.cp_top_k, cps.top_p = r.cp_top_p;
    cps.rng_state = r.greedy ? nullptr : &state;
    const int H = talker->hidden_size(), text_vocab = file->text_vocab();
    std::vector<float> input(size_t(H), 0.0f), embedding(size_t(H), 0.0f);
    std::vector<int32_t> rest(N_CODEBOOKS - 1);
    kz::Joiner joiner;
    CodecPipeline codec_pipeline(lane.codec, samples_per_frame, overlap, *batcher);
    kz::Batcher::Member member(*batcher);
    bool stop = false;
    std::unique_ptr<kz::TimeStretch> stretch;
    if (r.speed != 1.0f) stretch = std::make_unique<kz::TimeStretch>(sample_rate, double(r.speed));
    std::vector<int32_t> held_codes;  // codes of chunks whose stretched audio is not ready yet

    // One chunk to the callback (stretched at the request's speed); false: stop.
    auto emit = [&](std::vector<float> &audio, const int32_t *codes, int n_frames, int piece) {
        if (stretch) {
            std::vector<float> stretched;
            stretch->push(audio.data(), audio.size(), stretched);
            held_codes.insert(held_codes.end(), codes, codes + size_t(n_frames) * N_CODEBOOKS);
            if (stretched.empty()) return true;
            audio.swap(stretched);
            codes = held_codes.data(), n_frames = int(held_codes.size() / N_CODEBOOKS);
        }
        res.n_samples += int64_t(audio.size());
        if (res.first_audio_ms < 0) res.first_audio_ms = ms_since(start);
        kz_tts_chunk chunk{audio.data(), int32_t(audio.size()), codes, n_frames, int32_t(piece), res.n_frames};
        const bool go_on = cb == nullptr || cb(&chunk, user) != 0;
        held_codes.clear();
        return go_on;
    };

    int index = 0;
    bool last_known = false;  // the last piece was known as such (else the joiner still holds its tail)
    for (; !stop && pieces.next(); ++index) {
        const kz::Prompt &prompt = pieces.prompt();
        const bool last_piece = pieces.last_piece();
        last_known = last_piece;
        const int room = pieces.room();
        std::vector<int32_t> pending;                      // codes of the frames waiting for the codec
        int want = 1;                                      // a piece's first frame alone, then chunk_frames
        int status = kz_codec_stream_restart(lane.codec);  // the pipeline is idle between pieces
        if (status != KZ_OK) throw Error(status, kz_codec_stream_last_error(lane.codec));
        if (!lane.prime_codes.empty()) prime_codec(lane);
        sampler.reset();

        // Hands the decoded chunks to the callback in order; waits for all pushed ones when
        // `drain`, and for the request's first (the first audio comes as early as serial).
        // false = stop (cancelled or the callback said so): nothing after it is delivered.
        auto deliver = [&](bool drain) {
            kz::Batcher::Member::Away away(member);
            while (std::unique_ptr<CodecJob> job = codec_pipeline.pop(drain || res.n_frames == 0)) {
                if (job->status != KZ_OK) throw Error(job->status, job->error);
                if (lane.cancelled.load()) return false;
                res.codec_ms += job->ms;
                const int n = int(job->codes.size() / N_CODEBOOKS);
                lane.codes.insert(lane.codes.end(), job->codes.begin(), job->codes.end());
                res.n_frames += n;
                std::vector<float> out(job->audio.size());
                out.resize(joiner.push(job->audio.data(), job->audio.size(), last_piece, out.data()));
                if (!emit(out, job->codes.data(), n, index)) return false;
            }
            return true;
        };

        const int positions = int(prompt.n_prefill()) + room;
        if (positions > talker->n_ctx())
            throw Error(KZ_ERR_INVALID_ARGUMENT, "an utterance of " + std::to_string(positions) +
                                                     " positions does not fit the talker's context of " +
                                                     std::to_string(talker->n_ctx()));
        member.enter();  // the piece's frames: the other requests step with this one
        auto t = Clock::now();
        {
            kz::StageMark<kz::STAGE_PREFILL> mark;
            const int b = batcher->talker_step(lane.slot, prompt.prefill.data(), int(prompt.n_prefill()), positions);
            res.batch_max = std::max(res.batch_max, b);
        }
        res.prefill_ms += ms_since(t);
        bool at_eos = false;
        for (int frame = 0; frame <= room; ++frame) {
            const auto now = Clock::now();
            res.talker_ms += std::chrono::duration<double, std::milli>(now - t).count();
            const int cb0 = sampler.choose(talker->logits(lane.slot) + text_vocab, &state);
            if (cb0 == file->voices().codec_eos) {
                at_eos = true;
                break;
            }
            if (frame == room) break;
            {
                kz::StageMark<kz::STAGE_CODE_PREDICTOR> mark;
                res.batch_max =
                    std::max(res.batch_max, batcher->cp_frame(lane.slot, cb0, cps, rest.data(), embedding.data()));
            }
            res.code_predictor_ms += ms_since(now);
            pending.push_back(cb0);
            pending.insert(pending.end(), rest.begin(), rest.end());
            // text streamed in: all the audio out before waiting for text, and a piece ends at
            // its budget once its text (and so its budget) is known
            const bool over = pieces.over(frame + 1), waits = !pieces.ready(size_t(frame));
            if (int(pending.size()) == want * N_CODEBOOKS || over || waits) {
                kz::Batcher::Member::Away away(member);  // (a serial codec decodes here)
                codec_pipeline.push(std::move(pending));
                pending.clear();
                want = r.chunk_frames;
            }
            if (!deliver(waits) || lane.cancelled.load()) stop = true;
            if (stop || over) break;
            const float *text_row = nullptr;
            {
                kz::Batcher::Member::Away away(member);  // (text streamed in may not have come yet)
                text_row = pieces.text_row(size_t(frame));
            }
            if (!text_row) {
                stop = true;
                break;
            }
            for (int k = 0; k < H; ++k) input[size_t(k)] = embedding[size_t(k)] + text_row[k];
            t = Clock::now();
            kz::StageMark<kz::STAGE_TALKER> mark;
            res.batch_max = std::max(res.batch_max, batcher->talker_step(lane.slot, input.data(), 1));
        }
        member.leave();  // the piece's tail: the codec and callbacks only
        if (!stop && !pending.empty()) codec_pipeline.push(std::move(pending));
        if (!stop && !deliver(true)) stop = true;
        if (stop) codec_pipeline.discard();
        joiner.end_piece();
        ++res.n_pieces;
        if (!stop && !at_eos) ++res.pieces_at_budget;
    }
    if (lane.cancelled.load()) stop = true;
    if (!stop && index == 0) throw Error(KZ_ERR_INVALID_ARGUMENT, "empty text: there is nothing to say");
    if (!stop && !last_known) {  // the last piece was not known in advance: its held-back tail
        std::vector<float> tail = joiner.flush();
        if (!emit(tail, nullptr, 0, index - 1)) stop = true;
    }
    if (stretch && !stop) {  // the stream's rest
        std::vector<float> rest;
        stretch->finish(rest);
        if (!rest.empty()) {
            stretch.reset();
            if (!emit(rest, held_codes.data(), int(held_codes.size() / N_CODEBOOKS), index - 1)) stop = true;
        }
    }
    res.stop_reason = stop ? KZ_TTS_STOP_CANCELLED : res.pieces_at_budget ? KZ_TTS_STOP_BUDGET : KZ_TTS_STOP_EOS;
    res.total_ms = ms_since(start);
    return index;
}

// A request whose text is pushed while it is said: the frame loop runs on `worker`.
struct kz_tts_stream {
    kz_tts *tts = nullptr;
    Lane *lane = nullptr;
    kz_tts_request request{};
    kz_tts_chunk_cb callback = nullptr;
    void *user = nullptr;
    std::vector<int32_t> instruct_ids;
    Clone clone;
    kz::PromptRequest prompt_request;
    TextInbox inbox;
    std::thread worker;
    int status = KZ_OK;
    std::string error;
    kz_tts_result result{};
    bool finished = false;  // finish (or free) has ended the input

    // Checks the request (kz_tts_stream_begin's rules) and builds what every piece shares.
    void prepare() {
        const kz_tts_request &r = request;
        check_request(r);
        if (r.text_streaming != 1) {
            throw Error(KZ_ERR_INVALID_ARGUMENT,
                        "text streamed in is said in the model's streaming-text mode: text_streaming must be 1");
        }
        const std::string instruct = str(r.instruct);
        if (!instruct.empty()) {
            kz::decode_utf8(instruct);
            instruct_ids = tts->talker->tokenize(kz::instruct_text(instruct));
        }
        clone = tts->clone(r);
        if (clone.icl) {
            throw Error(KZ_ERR_INVALID_ARGUMENT,
                        "ICL cloning does not take text streamed in (its prompt aligns the whole text with the "
                        "reference): set xvector_only = 1 or synthesize the whole text");
        }
        kz::PromptRequest &pr = prompt_request;
        pr.language = r.language && *r.language ? r.language : "auto";
        pr.speaker = str(r.speaker);
        pr.instruct_ids = instruct.empty() ? nullptr : &instruct_ids;
        if (!r.voice && r.xvector) clone.xvector.assign(r.xvector, r.xvector + r.xvector_len);  // (kept for the worker)
        pr.xvector = r.voice || r.xvector ? clone.xvector.data() : nullptr;
        pr.xvector_len = r.voice || r.xvector ? int(clone.xvector.size()) : 0;
        pr.text_streaming = true;
        // the voice, language and instruct rules of the prompt, on a text of one word (as TTS.stream_text)
        kz::build_prompt(*tts->file, tts->file->voices(), tts->talker->tokenize(kz::chat_text("a")), pr);
        // the worker reads the numbers only: what the pointers gave is copied above
        request.speaker = request.language = request.instruct = nullptr;
        request.xvector = nullptr, request.voice = nullptr;
    }

    void work() {
        result.struct_size = sizeof(kz_tts_result);
        result.first_audio_ms = -1;
        status = kz::run_guarded(
            [&] {
                StreamPieces pieces(*tts->talker, inbox, lane->cancelled);
                TextStreamSource source(*tts->file, pieces, prompt_request, request.max_frames, tts->talker->n_ctx());
                tts->run(*lane, source, request, callback, user, result);
            },
            [&](const char *m) { error = m; }, KZ_ERR_COMPUTE);
    }

    // Ends the input (cancel: and the request) and waits for the worker.
    void end(bool cancel) {
        if (cancel) lane->cancelled.store(true);
        {
            std::lock_guard<std::mutex> lock(inbox.mutex);
            inbox.ended = true;
        }
        inbox.arrived.notify_all();
        worker.join();
        finished = true;
        tts->leave(lane);
    }
};

namespace {

// kz_tts_last_error's message: the calling thread's own, as requests run on several threads at once
thread_local const kz_tts *error_of = nullptr;
thread_local std::string last_error;

void set_error(const kz_tts *tts, const std::string &message) { error_of = tts, last_error = message; }

}  // namespace

extern "C" {

KZ_API kz_tts_params kz_tts_default_params(void) {
    kz_tts_params p{};
    p.struct_size = sizeof(kz_tts_params);
    p.n_threads = 2;
    p.codec_weights = KZ_CODEC_WEIGHTS_F16;
    p.cp_weights = KZ_CP_WEIGHTS_AUTO;
    p.n_ctx = 2048;
    p.n_batch = 64;
    p.verbose = 0;
    p.codec_threads = -1;
    p.max_batch = 1;
    return p;
}

KZ_API int32_t kz_tts_auto_codec_threads(int32_t n_threads) {
    const int spare = available_cores() - std::max(n_threads, 1);
    return spare < 1 ? 0 : std::min(spare, std::max(n_threads, 1));
}

KZ_API kz_tts_request kz_tts_default_request(void) {
    kz_tts_request r{};
    r.struct_size = sizeof(kz_tts_request);
    r.text_streaming = 1;
    r.temperature = r.cp_temperature = 0.9f;
    r.top_k = r.cp_top_k = 50;
    r.top_p = r.cp_top_p = 1.0f;
    r.repetition_penalty = 1.05f;
    r.seed = -1;
    r.chunk_frames = 4;
    r.min_frames = kz::SamplingConfig{}.min_new_tokens;
    r.xvector_only = -1;
    r.speed = 1.0f;
    return r;
}

KZ_API int kz_tts_load(const char *talker_path, const char *mmproj_path, const kz_tts_params *params, kz_tts **out,
                       char *err, size_t err_len) {
    if (out) *out = nullptr;
    std::unique_ptr<kz_tts> tts;
    int status = KZ_OK;
    // (on a thread of its own, which ends with the load: the OpenMP team that llama.cpp's load
    // computes with must not outlive it on the caller's thread, where it slowed every request
    // made from another thread ~1.6x, e.g. a server's; measured on the x86 test machine)
    std::thread loader([&] {
        status = kz::run_guarded(
            [&] {
                if (!talker_path || !mmproj_path || !out)
                    throw Error(KZ_ERR_INVALID_ARGUMENT, "talker_path, mmproj_path and out are required");
                const kz_tts_params p = params ? *params : kz_tts_default_params();
                if (p.struct_size != sizeof(kz_tts_params)) {
                    throw Error(KZ_ERR_INVALID_ARGUMENT, "kz_tts_params.struct_size is " +
                                                             std::to_string(p.struct_size) + ", this library's is " +
                                                             std::to_string(sizeof(kz_tts_params)) +
                                                             ": start from kz_tts_default_params()");
                }
                if (p.n_threads < 1) throw Error(KZ_ERR_INVALID_ARGUMENT, "n_threads must be >= 1");
                if (p.codec_threads > 512)
                    throw Error(KZ_ERR_INVALID_ARGUMENT, "codec_threads must be <= 512 (0: serial, < 0: auto)");
                if (p.n_ctx < 16 || p.n_batch < 1)
                    throw Error(KZ_ERR_INVALID_ARGUMENT, "n_ctx must be >= 16 and n_batch >= 1");
                if (p.queue < 0)
                    throw Error(KZ_ERR_INVALID_ARGUMENT, "queue must be >= 0, got " + std::to_string(p.queue));
                if (p.max_batch < 1 || p.max_batch > KZ_TTS_MAX_BATCH)
                    throw Error(KZ_ERR_INVALID_ARGUMENT, "max_batch must be in 1.." + std::to_string(KZ_TTS_MAX_BATCH) +
                                                             ", got " + std::to_string(p.max_batch));
                tts.reset(new kz_tts());
                tts->file.reset(new kz::TalkerFile(talker_path));
                // the talker first: llama.cpp reads all of its file in while loading, so its peak comes
                // before the other stages exist; token_embd's pages then leave the process (the prompt
                // reads its rows from the file, llama.cpp never does: the talker is fed embeddings)
                tts->talker.reset(
                    new kz::Talker(talker_path, p.n_threads, p.n_ctx, p.n_batch, p.verbose != 0, p.max_batch));
                kz_release_file_pages(talker_path, tts->file->embd_offset(), tts->file->embd_bytes());
                char buf[1024] = "";
                kz_cp_params cpp = kz_cp_default_params();
                cpp.n_threads = p.n_threads;
                cpp.weight_type = p.cp_weights;
                int s = kz_cp_load(mmproj_path, &cpp, &tts->cp, buf, sizeof buf);
                if (s != KZ_OK) throw Error(s, buf);
                const int codec_threads =
                    p.codec_threads < 0 ? kz_tts_auto_codec_threads(p.n_threads) : p.codec_threads;
                tts->overlap = codec_threads > 0;
                s = kz_codec_load(mmproj_path, tts->overlap ? codec_threads : p.n_threads, p.codec_weights, &tts->codec,
                                  buf, sizeof buf);
                if (s != KZ_OK) throw Error(s, buf);
                kz::check_model_files(talker_path,
                                      mmproj_path);  // (after the loaders: their errors are the precise ones)
                if (kz_cp_n_embd_in(tts->cp) != tts->file->hidden() ||
                    kz_cp_cb0_vocab(tts->cp) != tts->file->codec_vocab()) {
                    throw Error(KZ_ERR_FORMAT, std::string(mmproj_path) + " does not belong to " + talker_path +
                                                   " (code predictor width or codec vocabulary differ)");
                }
                tts->batcher.reset(new kz::Batcher(*tts->talker, tts->cp));
                for (int i = 0; i < p.max_batch; ++i) {
                    tts->lanes.emplace_back(new Lane());
                    tts->lanes.back()->slot = i;
                    s = kz_codec_stream_new(tts->codec, &tts->lanes.back()->codec);
                    if (s != KZ_OK) throw Error(s, kz_codec_last_error(tts->codec));
                }
                tts->mmproj_path = mmproj_path;
                tts->n_threads = p.n_threads, tts->queue = p.queue;
                tts->sample_rate = kz_codec_sample_rate(tts->codec);
                tts->samples_per_frame = kz_codec_samples_per_frame(tts->codec);
                const kz::VoiceTable &v = tts->file->voices();
                std::vector<std::string> speakers;
                for (const auto &kv : v.speakers) speakers.push_back(kv.first);
                tts->info = "{\"model_type\": " + kz::json_string(v.model_type) +
                            ", \"sample_rate\": " + std::to_string(tts->sample_rate) +
                            ", \"speakers\": " + kz::json_list(speakers) +
                            ", \"languages\": " + kz::json_list(v.spoken_languages()) +
                            ", \"supports_instruct\": " + (v.supports_instruct ? "true" : "false") +
                            ", \"xvector_size\": " + std::to_string(tts->file->hidden()) + "}";
            },
            [&](const char *m) { kz::write_error(err, err_len, m); }, KZ_ERR_FORMAT);
    });
    loader.join();
    if (status == KZ_OK) *out = tts.release();
    return status;
}

KZ_API void kz_tts_free(kz_tts *tts) { delete tts; }

KZ_API const char *kz_tts_model_info(const kz_tts *tts) { return tts ? tts->info.c_str() : "{}"; }

KZ_API int32_t kz_tts_sample_rate(const kz_tts *tts) { return tts ? tts->sample_rate : 0; }

KZ_API const char *kz_tts_last_error(const kz_tts *tts) {
    if (!tts) return "no handle";
    return error_of == tts ? last_error.c_str() : "";
}

KZ_API int kz_tts_synthesize(kz_tts *tts, const char *text, const kz_tts_request *request, kz_tts_chunk_cb callback,
                             void *user_data, kz_tts_result *result) {
    if (!tts) return KZ_ERR_INVALID_ARGUMENT;
    const char *why = "";
    Lane *lane = tts->take_lane(&why);
    if (!lane) {
        set_error(tts, why);
        return KZ_ERR_STATE;
    }
    kz_tts_result res{};
    res.struct_size = sizeof(kz_tts_result);
    res.first_audio_ms = -1;
    set_error(tts, "");
    int status = kz::run_guarded(
        [&] {
            if (!text || !request) throw Error(KZ_ERR_INVALID_ARGUMENT, "text and request are required");
            if (request->struct_size != sizeof(kz_tts_request)) {
                throw Error(KZ_ERR_INVALID_ARGUMENT, "kz_tts_request.struct_size is " +
                                                         std::to_string(request->struct_size) + ", this library's is " +
                                                         std::to_string(sizeof(kz_tts_request)) +
                                                         ": start from kz_tts_default_request()");
            }
            if (result && result->struct_size != sizeof(kz_tts_result)) {
                throw Error(KZ_ERR_INVALID_ARGUMENT, "kz_tts_result.struct_size must be sizeof(kz_tts_result)");
            }
            const std::vector<Piece> pieces = tts->plan(text, *request, *lane);
            TextSource source(pieces);
            tts->run(*lane, source, *request, callback, user_data, res);
        },
        [&](const char *m) { set_error(tts, m); }, KZ_ERR_COMPUTE);
    if (result && result->struct_size == sizeof(kz_tts_result)) *result = res;
    tts->leave(lane);
    return status;
}

KZ_API void kz_tts_cancel(kz_tts *tts) {
    if (!tts) return;
    std::lock_guard<std::mutex> lock(tts->lanes_mutex);
    for (auto &lane : tts->lanes) {
        if (!lane->taken) continue;
        lane->cancelled.store(true);
        if (lane->wake) lane->wake();
    }
    ++tts->cancels;  // the requests waiting for a seat give up
    tts->seat_freed.notify_all();
}

KZ_API int kz_tts_stream_begin(kz_tts *tts, const kz_tts_request *request, kz_tts_chunk_cb callback, void *user_data,
                               kz_tts_stream **out, char *err, size_t err_len) {
    if (out) *out = nullptr;
    if (!tts || !out) {
        kz::write_error(err, err_len, "tts and out are required");
        return KZ_ERR_INVALID_ARGUMENT;
    }
    const char *why = "";
    Lane *lane = tts->take_lane(&why);
    if (!lane) {
        kz::write_error(err, err_len, why);
        return KZ_ERR_STATE;
    }
    std::unique_ptr<kz_tts_stream> stream(new kz_tts_stream());
    stream->tts = tts, stream->lane = lane, stream->callback = callback, stream->user = user_data;
    const int status = kz::run_guarded(
        [&] {
            if (!request) throw Error(KZ_ERR_INVALID_ARGUMENT, "request is required");
            if (request->struct_size != sizeof(kz_tts_request)) {
                throw Error(KZ_ERR_INVALID_ARGUMENT, "kz_tts_request.struct_size is " +
                                                         std::to_string(request->struct_size) + ", this library's is " +
                                                         std::to_string(sizeof(kz_tts_request)) +
                                                         ": start from kz_tts_default_request()");
            }
            stream->request = *request;
            stream->prepare();
            kz_tts_stream *s = stream.get();
            {
                std::lock_guard<std::mutex> lock(tts->lanes_mutex);
                lane->wake = [s] {
                    std::lock_guard<std::mutex> inbox_lock(s->inbox.mutex);
                    s->inbox.arrived.notify_all();
                };
            }
            s->worker = std::thread([s] { s->work(); });
        },
        [&](const char *m) { kz::write_error(err, err_len, m); }, KZ_ERR_COMPUTE);
    if (status != KZ_OK) {
        tts->leave(lane);
        return status;
    }
    kz::write_error(err, err_len, "");
    *out = stream.release();
    return KZ_OK;
}

KZ_API int kz_tts_stream_push(kz_tts_stream *stream, const char *utf8, size_t n) {
    if (!stream || (n && !utf8)) return KZ_ERR_INVALID_ARGUMENT;
    if (stream->finished) return KZ_ERR_STATE;
    {
        std::lock_guard<std::mutex> lock(stream->inbox.mutex);
        std::string data = stream->inbox.partial + std::string(utf8, n);
        const size_t whole = whole_code_points(data);
        try {
            stream->inbox.text += kz::decode_utf8(data.substr(0, whole));
        } catch (...) {
            return KZ_ERR_INVALID_ARGUMENT;
        }
        stream->inbox.partial = data.substr(whole);
    }
    stream->inbox.arrived.notify_all();
    return KZ_OK;
}

KZ_API int kz_tts_stream_finish(kz_tts_stream *stream, kz_tts_result *result) {
    if (!stream) return KZ_ERR_INVALID_ARGUMENT;
    if (stream->finished) return KZ_ERR_STATE;
    const bool cut = !stream->inbox.partial.empty();  // (push and finish are the app's calls, in order)
    stream->end(cut);
    kz_tts *tts = stream->tts;
    set_error(tts, stream->error);
    int status = stream->status;
    if (cut && status == KZ_OK) {
        status = KZ_ERR_INVALID_ARGUMENT;
        set_error(tts, "the text ends inside a UTF-8 character");
    }
    if (result && result->struct_size == sizeof(kz_tts_result)) *result = stream->result;
    return status;
}

KZ_API void kz_tts_stream_free(kz_tts_stream *stream) {
    if (stream && !stream->finished) stream->end(true);
    delete stream;
}

KZ_API int32_t kz_tts_last_codes(const kz_tts *tts, int32_t *out, size_t capacity) {
    if (!tts) return 0;
    std::lock_guard<std::mutex> lock(tts->lanes_mutex);
    const size_t n = std::min(capacity, tts->last_codes.size());
    if (out && n) std::copy(tts->last_codes.begin(), tts->last_codes.begin() + long(n), out);
    return int32_t(tts->last_codes.size() / N_CODEBOOKS);
}

KZ_API int kz_tts_enroll(kz_tts *tts, const float *pcm, int64_t n_samples, int32_t sample_rate, const char *ref_text,
                         float ref_silence, kz_voice **out) {
    if (out) *out = nullptr;
    if (!tts) return KZ_ERR_INVALID_ARGUMENT;
    const char *why = "";
    Lane *lane = tts->take_lane(&why);  // (enrolment takes a seat: it computes as a request does)
    if (!lane) {
        set_error(tts, why);
        return KZ_ERR_STATE;
    }
    set_error(tts, "");
    const int status = kz::run_guarded(
        [&] {
            if (!out) throw Error(KZ_ERR_INVALID_ARGUMENT, "kz_tts_enroll needs an output voice");
            std::lock_guard<std::mutex> lock(tts->model_mutex);
            kz::EnrollModel m{
                tts->file->voices().model_type, tts->mmproj_path,      tts->file->hidden(), tts->n_threads,
                &tts->speaker_encoder_sha256,   &tts->speaker_encoder, &tts->codec_encoder};
            *out = kz::enroll(m, pcm, n_samples, sample_rate, ref_text, ref_silence);
        },
        [&](const char *m) { set_error(tts, m); }, KZ_ERR_COMPUTE);
    {
        std::lock_guard<std::mutex> lock(tts->lanes_mutex);
        lane->taken = false;  // (last_codes stay those of the last request)
    }
    return status;
}

}  // extern "C"
