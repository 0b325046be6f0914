// JNI bridge of org.kazetts.KazeTts over kazetts/tts.h: a jlong handle, text and strings as
// UTF-8 byte[] (a desktop JVM's GetStringUTFChars gives modified UTF-8, which breaks emoji),
// callbacks on the synthesizing thread, every failure a Java exception. Only Java_* and
// JNI_OnLoad are exported (kazetts_jni.map).
#include <jni.h>

#include <algorithm>
#include <exception>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "kazetts/tts.h"
#include "kazetts/voice.h"

namespace {

jclass g_illegal_argument, g_illegal_state, g_kazetts_exception;
jmethodID g_on_chunk, g_exception_init;
JavaVM *g_vm;

jclass global_class(JNIEnv *env, const char *name) {
    jclass local = env->FindClass(name);
    if (!local) return nullptr;
    auto global = static_cast<jclass>(env->NewGlobalRef(local));
    env->DeleteLocalRef(local);
    return global;
}

// A kz_status as a Java exception: bad requests are IllegalArgumentException, calls out of
// order IllegalStateException, the rest KazeTtsException (with the status).
void throw_status(JNIEnv *env, int status, const std::string &message) {
    const std::string text = std::string(kz_status_name(status)) + ": " + message;
    if (status == KZ_ERR_INVALID_ARGUMENT) {
        env->ThrowNew(g_illegal_argument, text.c_str());
    } else if (status == KZ_ERR_STATE) {
        env->ThrowNew(g_illegal_state, text.c_str());
    } else {
        jstring jmsg = env->NewStringUTF(text.c_str());
        auto e = static_cast<jthrowable>(env->NewObject(g_kazetts_exception, g_exception_init, jmsg, jint(status)));
        if (e) env->Throw(e);
    }
}

// The bytes of a Java byte[] as a string; a null array is "not given".
bool bytes(JNIEnv *env, jbyteArray array, std::string &out) {
    out.clear();
    if (!array) return false;
    const jsize n = env->GetArrayLength(array);
    out.resize(size_t(n));
    if (n) env->GetByteArrayRegion(array, 0, n, reinterpret_cast<jbyte *>(&out[0]));
    return true;
}

kz_tts *handle(JNIEnv *env, jlong h) {
    if (h == 0) env->ThrowNew(g_illegal_state, "this KazeTts is closed");
    return reinterpret_cast<kz_tts *>(h);
}

kz_voice *voice_handle(JNIEnv *env, jlong h) {
    if (h == 0) env->ThrowNew(g_illegal_state, "this Voice is closed");
    return reinterpret_cast<kz_voice *>(h);
}

jbyteArray byte_array(JNIEnv *env, const std::string &s) {
    jbyteArray out = env->NewByteArray(jsize(s.size()));
    if (out) env->SetByteArrayRegion(out, 0, jsize(s.size()), reinterpret_cast<const jbyte *>(s.data()));
    return out;
}

// Runs a JNI body and turns any C++ exception into a Java one.
template <class Body>
auto guarded(JNIEnv *env, Body &&body) -> decltype(body()) {
    try {
        return body();
    } catch (const std::bad_alloc &) {
        env->ThrowNew(env->FindClass("java/lang/OutOfMemoryError"), "kazetts: out of native memory");
    } catch (const std::exception &e) {
        env->ThrowNew(g_kazetts_exception, e.what());
    }
    return decltype(body())();
}

struct CallbackState {
    JNIEnv *env;
    jobject callback;  // org.kazetts.KazeTts$ChunkCallback or null
    bool collect;
    std::vector<float> audio;  // everything, when collect
};

// callback.onChunk(samples, codes, framesSoFar): 1 to go on, 0 to stop (an exception pending
// in env stops the request too).
int32_t call_on_chunk(JNIEnv *env, jobject callback, const kz_tts_chunk *chunk) {
    jfloatArray samples = env->NewFloatArray(chunk->n_samples);
    jintArray codes = samples ? env->NewIntArray(chunk->n_frames * 16) : nullptr;
    if (!codes) return 0;  // OutOfMemoryError pending
    env->SetFloatArrayRegion(samples, 0, chunk->n_samples, chunk->samples);
    env->SetIntArrayRegion(codes, 0, chunk->n_frames * 16, reinterpret_cast<const jint *>(chunk->codes));
    jboolean go_on = env->CallBooleanMethod(callback, g_on_chunk, samples, codes, jint(chunk->frames_total));
    env->DeleteLocalRef(samples);
    env->DeleteLocalRef(codes);
    return env->ExceptionCheck() ? 0 : go_on ? 1 : 0;  // an exception in the callback stops the request
}

int32_t on_chunk(const kz_tts_chunk *chunk, void *user) {
    auto *s = static_cast<CallbackState *>(user);
    if (s->collect) s->audio.insert(s->audio.end(), chunk->samples, chunk->samples + chunk->n_samples);
    return s->callback ? call_on_chunk(s->env, s->callback, chunk) : 1;
}

// A text stream's worker thread attached to the JVM for its callbacks, detached when it ends.
struct Attachment {
    JNIEnv *env = nullptr;
    ~Attachment() {
        if (env) g_vm->DetachCurrentThread();
    }
};

// org.kazetts.KazeTts.TextStream behind a jlong: the stream, the callback (a global reference,
// called on the stream's worker thread) and the exception it threw, rethrown by finish.
struct JniStream {
    kz_tts_stream *stream = nullptr;
    kz_tts *tts = nullptr;
    jobject callback = nullptr;
    jthrowable thrown = nullptr;  // global reference
};

int32_t on_stream_chunk(const kz_tts_chunk *chunk, void *user) {
    auto *s = static_cast<JniStream *>(user);
    if (!s->callback) return 1;
    thread_local Attachment attachment;
    if (!attachment.env &&
        g_vm->AttachCurrentThreadAsDaemon(reinterpret_cast<void **>(&attachment.env), nullptr) != JNI_OK) {
        attachment.env = nullptr;
        return 0;
    }
    JNIEnv *env = attachment.env;
    const int32_t go_on = call_on_chunk(env, s->callback, chunk);
    if (env->ExceptionCheck()) {  // kept for finish, which throws it on the app's thread
        jthrowable e = env->ExceptionOccurred();
        env->ExceptionClear();
        if (!s->thrown) s->thrown = static_cast<jthrowable>(env->NewGlobalRef(e));
        env->DeleteLocalRef(e);
    }
    return go_on;
}

// A request's numbers as KazeTts.Options passes them: ints text_streaming, greedy, top_k,
// cp_top_k, max_frames, chunk_frames, min_frames, xvector_only; floats temperature, top_p,
// repetition_penalty, cp_temperature, cp_top_p, speed.
constexpr jsize N_INTS = 8, N_FLOATS = 6;

void request_numbers(const kz_tts_request &r, jint *iv, jfloat *fv) {
    const jint ints[N_INTS] = {r.text_streaming, r.greedy,       r.top_k,      r.cp_top_k,
                               r.max_frames,     r.chunk_frames, r.min_frames, r.xvector_only};
    const jfloat floats[N_FLOATS] = {r.temperature,    r.top_p,    r.repetition_penalty,
                                     r.cp_temperature, r.cp_top_p, r.speed};
    std::copy(ints, ints + N_INTS, iv);
    std::copy(floats, floats + N_FLOATS, fv);
}

void set_request_numbers(kz_tts_request &r, const jint *iv, const jfloat *fv) {
    r.text_streaming = iv[0], r.greedy = iv[1], r.top_k = iv[2], r.cp_top_k = iv[3], r.max_frames = iv[4],
    r.chunk_frames = iv[5], r.min_frames = iv[6], r.xvector_only = iv[7];
    r.temperature = fv[0], r.top_p = fv[1], r.repetition_penalty = fv[2], r.cp_temperature = fv[3], r.cp_top_p = fv[4],
    r.speed = fv[5];
}

// A kz_tts_request from KazeTts.Options' fields, with the buffers it points to.
struct JavaRequest {
    std::string speaker, language, instruct;
    std::vector<float> xvector;

    // (the arrays' lengths checked by the caller)
    kz_tts_request read(JNIEnv *env, jbyteArray speaker_b, jbyteArray language_b, jbyteArray instruct_b,
                        jfloatArray xvector_a, jintArray ints, jfloatArray floats, jlong seed) {
        jint iv[N_INTS];
        jfloat fv[N_FLOATS];
        env->GetIntArrayRegion(ints, 0, N_INTS, iv);
        env->GetFloatArrayRegion(floats, 0, N_FLOATS, fv);
        if (xvector_a) {
            xvector.resize(size_t(env->GetArrayLength(xvector_a)));
            env->GetFloatArrayRegion(xvector_a, 0, jsize(xvector.size()), xvector.data());
        }
        kz_tts_request r = kz_tts_default_request();
        r.speaker = bytes(env, speaker_b, speaker) ? speaker.c_str() : nullptr;
        r.language = bytes(env, language_b, language) ? language.c_str() : nullptr;
        r.instruct = bytes(env, instruct_b, instruct) ? instruct.c_str() : nullptr;
        r.xvector = xvector_a ? xvector.data() : nullptr;
        r.xvector_len = int32_t(xvector.size());
        if (xvector_a && xvector.empty()) r.xvector_len = -1;  // reported as a bad request
        set_request_numbers(r, iv, fv);
        r.seed = seed;
        return r;
    }
};

// A request's figures as KazeTts.Stats reads them (11 values, see nativeSynthesize).
void write_stats(JNIEnv *env, jdoubleArray stats, const kz_tts_result &res) {
    const jdouble sv[11] = {double(res.stop_reason),
                            double(res.n_frames),
                            double(res.n_pieces),
                            double(res.pieces_at_budget),
                            double(res.n_samples),
                            res.prefill_ms,
                            res.talker_ms,
                            res.code_predictor_ms,
                            res.codec_ms,
                            res.first_audio_ms,
                            res.total_ms};
    env->SetDoubleArrayRegion(stats, 0, 11, sv);
}

bool option_arrays_ok(JNIEnv *env, jintArray ints, jfloatArray floats, jdoubleArray stats) {
    if (ints && floats && (!stats || env->GetArrayLength(stats) == 11) && env->GetArrayLength(ints) == N_INTS &&
        env->GetArrayLength(floats) == N_FLOATS) {
        return true;
    }
    throw_status(env, KZ_ERR_INVALID_ARGUMENT, "internal: option arrays of the wrong length");
    return false;
}

}  // namespace

extern "C" {

JNIEXPORT jint JNI_OnLoad(JavaVM *vm, void *) {
    JNIEnv *env = nullptr;
    g_vm = vm;
    if (vm->GetEnv(reinterpret_cast<void **>(&env), JNI_VERSION_1_6) != JNI_OK) return JNI_ERR;
    g_illegal_argument = global_class(env, "java/lang/IllegalArgumentException");
    g_illegal_state = global_class(env, "java/lang/IllegalStateException");
    g_kazetts_exception = global_class(env, "org/kazetts/KazeTtsException");
    jclass callback = env->FindClass("org/kazetts/KazeTts$ChunkCallback");
    if (!g_illegal_argument || !g_illegal_state || !g_kazetts_exception || !callback) return JNI_ERR;
    g_on_chunk = env->GetMethodID(callback, "onChunk", "([F[II)Z");
    g_exception_init = env->GetMethodID(g_kazetts_exception, "<init>", "(Ljava/lang/String;I)V");
    env->DeleteLocalRef(callback);
    return g_on_chunk && g_exception_init ? JNI_VERSION_1_6 : JNI_ERR;
}

JNIEXPORT jlong JNICALL Java_org_kazetts_KazeTts_nativeLoad(JNIEnv *env, jclass, jbyteArray talker, jbyteArray mmproj,
                                                            jint threads, jint codec_weights, jint n_ctx,
                                                            jint codec_threads, jint max_batch, jint queue) {
    return guarded(env, [&]() -> jlong {
        std::string talker_path, mmproj_path;
        if (!bytes(env, talker, talker_path) || !bytes(env, mmproj, mmproj_path)) {
            throw_status(env, KZ_ERR_INVALID_ARGUMENT, "the talker and mmproj paths are required");
            return 0;
        }
        kz_tts_params p = kz_tts_default_params();
        p.n_threads = threads;
        p.codec_weights = codec_weights;
        p.n_ctx = n_ctx;
        p.codec_threads = codec_threads;
        p.max_batch = max_batch;
        p.queue = queue;
        kz_tts *tts = nullptr;
        char err[1024] = "";
        int status = kz_tts_load(talker_path.c_str(), mmproj_path.c_str(), &p, &tts, err, sizeof err);
        if (status != KZ_OK) throw_status(env, status, err);
        return reinterpret_cast<jlong>(tts);
    });
}

JNIEXPORT void JNICALL Java_org_kazetts_KazeTts_nativeFree(JNIEnv *, jclass, jlong h) {
    kz_tts_free(reinterpret_cast<kz_tts *>(h));
}

JNIEXPORT void JNICALL Java_org_kazetts_KazeTts_nativeCancel(JNIEnv *, jclass, jlong h) {
    kz_tts_cancel(reinterpret_cast<kz_tts *>(h));
}

JNIEXPORT jbyteArray JNICALL Java_org_kazetts_KazeTts_nativeModelInfo(JNIEnv *env, jclass, jlong h) {
    kz_tts *tts = handle(env, h);
    return tts ? byte_array(env, kz_tts_model_info(tts)) : nullptr;
}

JNIEXPORT jint JNICALL Java_org_kazetts_KazeTts_nativeSampleRate(JNIEnv *env, jclass, jlong h) {
    kz_tts *tts = handle(env, h);
    return tts ? kz_tts_sample_rate(tts) : 0;
}

JNIEXPORT jintArray JNICALL Java_org_kazetts_KazeTts_nativeLastCodes(JNIEnv *env, jclass, jlong h) {
    return guarded(env, [&]() -> jintArray {
        kz_tts *tts = handle(env, h);
        if (!tts) return nullptr;
        std::vector<int32_t> codes(size_t(kz_tts_last_codes(tts, nullptr, 0)) * 16);
        kz_tts_last_codes(tts, codes.data(), codes.size());
        jintArray out = env->NewIntArray(jsize(codes.size()));
        if (out) env->SetIntArrayRegion(out, 0, jsize(codes.size()), reinterpret_cast<const jint *>(codes.data()));
        return out;
    });
}

// The defaults of a request (kz_tts_default_request): what a new KazeTts.Options holds.
JNIEXPORT jlong JNICALL Java_org_kazetts_KazeTts_nativeDefaultOptions(JNIEnv *env, jclass, jintArray ints,
                                                                      jfloatArray floats) {
    if (!ints || !floats || env->GetArrayLength(ints) != N_INTS || env->GetArrayLength(floats) != N_FLOATS) {
        throw_status(env, KZ_ERR_INVALID_ARGUMENT, "internal: option arrays of the wrong length");
        return 0;
    }
    const kz_tts_request r = kz_tts_default_request();
    jint iv[N_INTS];
    jfloat fv[N_FLOATS];
    request_numbers(r, iv, fv);
    env->SetIntArrayRegion(ints, 0, N_INTS, iv);
    env->SetFloatArrayRegion(floats, 0, N_FLOATS, fv);
    return jlong(r.seed);
}

// ints, floats: the request's numbers (request_numbers);
// stats (out, 11): stop reason, frames, pieces, pieces at budget, samples, prefill, talker,
// code predictor, codec, first audio, total (ms). Returns the whole audio when collect, else null.
JNIEXPORT jfloatArray JNICALL Java_org_kazetts_KazeTts_nativeSynthesize(JNIEnv *env, jclass, jlong h, jbyteArray text,
                                                                        jbyteArray speaker, jbyteArray language,
                                                                        jbyteArray instruct, jfloatArray xvector,
                                                                        jintArray ints, jfloatArray floats, jlong seed,
                                                                        jobject callback, jboolean collect,
                                                                        jdoubleArray stats, jlong voice) {
    return guarded(env, [&]() -> jfloatArray {
        kz_tts *tts = handle(env, h);
        if (!tts) return nullptr;
        std::string text_s;
        if (!bytes(env, text, text_s)) {
            throw_status(env, KZ_ERR_INVALID_ARGUMENT, "text is required");
            return nullptr;
        }
        if (!stats || !option_arrays_ok(env, ints, floats, stats)) return nullptr;
        if (text_s.find('\0') != std::string::npos) {
            throw_status(env, KZ_ERR_INVALID_ARGUMENT, "text contains a NUL character");
            return nullptr;
        }
        JavaRequest jr;
        kz_tts_request r = jr.read(env, speaker, language, instruct, xvector, ints, floats, seed);
        r.voice = reinterpret_cast<const kz_voice *>(voice);  // (0: none)
        CallbackState state{env, callback, collect == JNI_TRUE, {}};
        kz_tts_result res{};
        res.struct_size = sizeof(kz_tts_result);
        int status = kz_tts_synthesize(tts, text_s.c_str(), &r, on_chunk, &state, &res);
        if (env->ExceptionCheck()) return nullptr;  // thrown by the callback
        if (status != KZ_OK) {
            throw_status(env, status, kz_tts_last_error(tts));
            return nullptr;
        }
        write_stats(env, stats, res);
        if (!state.collect) return nullptr;
        jfloatArray out = env->NewFloatArray(jsize(state.audio.size()));
        if (out) env->SetFloatArrayRegion(out, 0, jsize(state.audio.size()), state.audio.data());
        return out;
    });
}

// org.kazetts.KazeTts.TextStream: begin (the request's checks: a bad one throws before any
// compute), push UTF-8 bytes, finish (stats as nativeSynthesize's), free.
JNIEXPORT jlong JNICALL Java_org_kazetts_KazeTts_nativeStreamBegin(JNIEnv *env, jclass, jlong h, jbyteArray speaker,
                                                                   jbyteArray language, jbyteArray instruct,
                                                                   jfloatArray xvector, jintArray ints,
                                                                   jfloatArray floats, jlong seed, jobject callback) {
    return guarded(env, [&]() -> jlong {
        kz_tts *tts = handle(env, h);
        if (!tts || !option_arrays_ok(env, ints, floats, nullptr)) return 0;
        JavaRequest jr;
        const kz_tts_request r = jr.read(env, speaker, language, instruct, xvector, ints, floats, seed);
        std::unique_ptr<JniStream> s(new JniStream());
        s->tts = tts;
        if (callback) s->callback = env->NewGlobalRef(callback);
        char err[1024];
        const int status = kz_tts_stream_begin(tts, &r, on_stream_chunk, s.get(), &s->stream, err, sizeof err);
        if (status != KZ_OK) {
            if (s->callback) env->DeleteGlobalRef(s->callback);
            throw_status(env, status, err);
            return 0;
        }
        return reinterpret_cast<jlong>(s.release());
    });
}

JNIEXPORT void JNICALL Java_org_kazetts_KazeTts_nativeStreamPush(JNIEnv *env, jclass, jlong h, jbyteArray text) {
    guarded(env, [&] {
        auto *s = reinterpret_cast<JniStream *>(h);
        std::string data;
        bytes(env, text, data);
        const int status = kz_tts_stream_push(s->stream, data.data(), data.size());
        if (status != KZ_OK) throw_status(env, status, "the text pushed is not UTF-8");
    });
}

JNIEXPORT void JNICALL Java_org_kazetts_KazeTts_nativeStreamFinish(JNIEnv *env, jclass, jlong h, jdoubleArray stats) {
    guarded(env, [&] {
        auto *s = reinterpret_cast<JniStream *>(h);
        kz_tts_result res{};
        res.struct_size = sizeof(kz_tts_result);
        const int status = kz_tts_stream_finish(s->stream, &res);
        if (s->thrown) {  // the callback's exception, on the app's thread
            env->Throw(s->thrown);
            return;
        }
        if (status != KZ_OK) {
            throw_status(env, status, kz_tts_last_error(s->tts));
            return;
        }
        write_stats(env, stats, res);
    });
}

JNIEXPORT void JNICALL Java_org_kazetts_KazeTts_nativeStreamFree(JNIEnv *env, jclass, jlong h) {
    auto *s = reinterpret_cast<JniStream *>(h);
    if (!s) return;
    kz_tts_stream_free(s->stream);  // (cancels and waits for the worker if not finished)
    if (s->callback) env->DeleteGlobalRef(s->callback);
    if (s->thrown) env->DeleteGlobalRef(s->thrown);
    delete s;
}

// KazeTts.enroll: a new kz_voice (the caller's Voice owns it), or 0 with an exception.
JNIEXPORT jlong JNICALL Java_org_kazetts_KazeTts_nativeEnroll(JNIEnv *env, jclass, jlong h, jfloatArray pcm,
                                                              jint sample_rate, jbyteArray ref_text,
                                                              jfloat ref_silence) {
    return guarded(env, [&]() -> jlong {
        kz_tts *tts = handle(env, h);
        if (!tts) return 0;
        std::vector<float> samples(size_t(env->GetArrayLength(pcm)));
        env->GetFloatArrayRegion(pcm, 0, jsize(samples.size()), samples.data());
        std::string text;
        const bool has_text = bytes(env, ref_text, text);
        if (has_text && text.find('\0') != std::string::npos) {
            throw_status(env, KZ_ERR_INVALID_ARGUMENT, "refText contains a NUL character");
            return 0;
        }
        kz_voice *v = nullptr;
        const int status = kz_tts_enroll(tts, samples.data(), int64_t(samples.size()), sample_rate,
                                         has_text ? text.c_str() : nullptr, ref_silence, &v);
        if (status != KZ_OK) throw_status(env, status, kz_tts_last_error(tts));
        return reinterpret_cast<jlong>(v);
    });
}

// org.kazetts.Voice: a kz_voice behind a jlong.

JNIEXPORT jlong JNICALL Java_org_kazetts_Voice_nativeRead(JNIEnv *env, jclass, jbyteArray path) {
    return guarded(env, [&]() -> jlong {
        std::string p;
        bytes(env, path, p);
        kz_voice *v = nullptr;
        char err[1024] = "";
        const int status = kz_voice_read(p.c_str(), &v, err, sizeof err);
        if (status != KZ_OK) throw_status(env, status == KZ_ERR_FORMAT ? KZ_ERR_INVALID_ARGUMENT : status, err);
        return reinterpret_cast<jlong>(v);
    });
}

JNIEXPORT void JNICALL Java_org_kazetts_Voice_nativeSave(JNIEnv *env, jclass, jlong h, jbyteArray path,
                                                         jboolean replace) {
    guarded(env, [&] {
        kz_voice *v = voice_handle(env, h);
        std::string p;
        bytes(env, path, p);
        char err[1024] = "";
        const int status = v ? kz_voice_save(v, p.c_str(), replace == JNI_TRUE, err, sizeof err) : KZ_OK;
        if (status != KZ_OK) throw_status(env, status, err);
    });
}

JNIEXPORT void JNICALL Java_org_kazetts_Voice_nativeFree(JNIEnv *, jclass, jlong h) {
    kz_voice_free(reinterpret_cast<kz_voice *>(h));
}

JNIEXPORT jfloatArray JNICALL Java_org_kazetts_Voice_nativeXvector(JNIEnv *env, jclass, jlong h) {
    kz_voice_info info = kz_voice_default_info();
    kz_voice *v = voice_handle(env, h);
    if (!v || kz_voice_get(v, &info) != KZ_OK) return nullptr;
    jfloatArray out = env->NewFloatArray(info.hidden_size);
    if (out) env->SetFloatArrayRegion(out, 0, info.hidden_size, info.xvector);
    return out;
}

JNIEXPORT jintArray JNICALL Java_org_kazetts_Voice_nativeRefCodes(JNIEnv *env, jclass, jlong h) {
    kz_voice_info info = kz_voice_default_info();
    kz_voice *v = voice_handle(env, h);
    if (!v || kz_voice_get(v, &info) != KZ_OK || !info.ref_codes) return nullptr;
    jintArray out = env->NewIntArray(info.ref_frames * 16);
    if (out) {
        env->SetIntArrayRegion(out, 0, info.ref_frames * 16, reinterpret_cast<const jint *>(info.ref_codes));
    }
    return out;
}

JNIEXPORT jbyteArray JNICALL Java_org_kazetts_Voice_nativeText(JNIEnv *env, jclass, jlong h, jint which) {
    kz_voice_info info = kz_voice_default_info();
    kz_voice *v = voice_handle(env, h);
    if (!v || kz_voice_get(v, &info) != KZ_OK) return nullptr;
    char seal[65] = "";
    if (which == 3) kz_voice_payload_sha256(v, seal);  // (hashes the whole voice: only when asked)
    const char *texts[] = {info.ref_text, info.model_type, info.speaker_encoder_sha256, seal};
    return which < 0 || which > 3 || !texts[which] ? nullptr : byte_array(env, texts[which]);
}

JNIEXPORT jfloat JNICALL Java_org_kazetts_Voice_nativeRefSeconds(JNIEnv *env, jclass, jlong h) {
    kz_voice_info info = kz_voice_default_info();
    kz_voice *v = voice_handle(env, h);
    return v && kz_voice_get(v, &info) == KZ_OK ? info.ref_seconds : 0.0f;
}

}  // extern "C"
