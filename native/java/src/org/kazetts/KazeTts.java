package org.kazetts;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.locks.ReentrantReadWriteLock;

/**
 * A loaded Qwen3-TTS model (talker + mmproj GGUF files) over libkazetts' C ABI (kazetts/tts.h).
 *
 * <p>Up to {@link Config#maxBatch} requests at a time (default 1), each from its own thread
 * ({@code generate}, {@code stream}, {@code enroll}): their frames are computed together, each
 * request getting the audio it gets alone; more wait for a seat ({@link Config#queue}) or throw
 * {@link IllegalStateException} (KZ_ERR_STATE). {@link #cancel()} may be called from any thread (Android's
 * {@code TextToSpeechService.onStop}); the running requests then end within one frame.
 * {@link #close()} cancels, waits for the running requests and frees the model; closing twice is
 * allowed. Text and strings cross JNI as UTF-8 bytes.
 *
 * <p>The native library is {@code kazetts_jni} ({@code System.loadLibrary}); it needs
 * libkazetts, libllama and libggml* beside it (see docs/android.md).
 */
public final class KazeTts implements AutoCloseable {
    static {
        System.loadLibrary("kazetts_jni");
    }

    /**
     * Codec decoder weights (kz_codec_weights, in its order): F16 is the fast default, F32 the reference path,
     * F16_SUMS F16 with float16 sums on ARM cores with FP16 arithmetic (~1.8x fewer vector instructions, waveform
     * correlation ~0.99995 with the reference; elsewhere the same as F16).
     */
    public enum CodecWeights { F32, F16, F16_SUMS }

    /** Load-time settings. */
    public static final class Config {
        public int threads = 2;
        public CodecWeights codecWeights = CodecWeights.F16;
        /** Talker positions per text piece (prompt + frames). */
        public int contextSize = 2048;
        /**
         * The codec decoder's own threads, decoding the frames already made while the talker and
         * code predictor (on {@code threads}) make the next ones: 0 = serial; -1 (default) = the
         * cores beyond {@code threads}, at most {@code threads}, and serial when there is no
         * spare core (kz_tts_auto_codec_threads). The audio and the chunks are the same either way.
         */
        public int codecThreads = -1;
        /**
         * Requests at once, 1..16 (kz_tts_params.max_batch): their talker steps and code predictor
         * frames are computed together; each live request holds its own talker KV cache.
         */
        public int maxBatch = 1;
        /** Requests that may wait for a seat beyond maxBatch, in arrival order (default 0: refused at once). */
        public int queue = 0;
    }

    /**
     * One request. A new Options holds the reference's defaults, read from libkazetts
     * (kz_tts_default_request): temperature 0.9, top-k 50 (0: off), top-p 1.0, repetition
     * penalty 1.05 for the talker, the same for the code predictor (cp*: the reference's subtalker_*).
     */
    public static final class Options {
        public String speaker;            // CustomVoice: a named speaker
        public String language = "auto";  // or one of languages()
        public String instruct;           // VoiceDesign, 1.7B CustomVoice
        public float[] xvector;           // Base: a speaker x-vector
        public boolean textStreaming;
        public boolean greedy;            // argmax after the repetition penalty
        public float temperature;         // > 0
        public int topK;                  // >= 0
        public float topP;                // in (0, 1]
        public float repetitionPenalty;   // > 0
        public float cpTemperature;
        public int cpTopK;
        public float cpTopP;
        /** >= 0: reproducible sampling; < 0: a random seed. */
        public long seed;
        /** Frames per text piece; 0: a budget from the piece's length. */
        public int maxFrames;
        /** Frames per audio chunk after a piece's first frame (which comes alone). */
        public int chunkFrames;
        /** End-of-speech is banned until a piece has this many frames (>= 0; default 2, the reference's). */
        public int minFrames;
        /** Base: a cloned voice (enroll, Voice.load); null: none. It must stay open while it is used. */
        public Voice voice;
        /** With a voice: -1 (default) ICL when it has its reference text, else x-vector; 0 ICL; 1 x-vector only. */
        public int xvectorOnly;
        /** The speaking rate, 0.25..4 (1: as the model says it): the audio time-stretched, pitch kept. */
        public float speed;

        public Options() {
            int[] ints = new int[INTS];
            float[] floats = new float[FLOATS];
            seed = nativeDefaultOptions(ints, floats);
            textStreaming = ints[0] != 0;
            greedy = ints[1] != 0;
            topK = ints[2];
            cpTopK = ints[3];
            maxFrames = ints[4];
            chunkFrames = ints[5];
            minFrames = ints[6];
            xvectorOnly = ints[7];
            temperature = floats[0];
            topP = floats[1];
            repetitionPenalty = floats[2];
            cpTemperature = floats[3];
            cpTopP = floats[4];
            speed = floats[5];
        }

        // the numbers of the request, in the JNI bridge's order (kazetts_jni.cpp: request_numbers)
        int[] ints() {
            return new int[] {textStreaming ? 1 : 0, greedy ? 1 : 0, topK, cpTopK, maxFrames, chunkFrames, minFrames,
                    xvectorOnly};
        }

        float[] floats() {
            return new float[] {temperature, topP, repetitionPenalty, cpTemperature, cpTopP, speed};
        }
    }

    private static final int INTS = 8, FLOATS = 6;

    /** Receives audio as frames are decoded, on the generating thread; return false to stop. */
    public interface ChunkCallback {
        boolean onChunk(float[] samples, int[] codes, int framesSoFar);
    }

    /** What a request did; times in milliseconds. */
    public static final class Stats {
        public final String stopReason;  // "eos", "budget" or "cancelled"
        public final int frames, pieces, piecesAtBudget;
        public final long samples;
        public final double prefillMs, talkerMs, codePredictorMs, codecMs, firstAudioMs, totalMs;

        Stats(double[] s) {
            stopReason = new String[] {"eos", "budget", "cancelled"}[(int) s[0]];
            frames = (int) s[1];
            pieces = (int) s[2];
            piecesAtBudget = (int) s[3];
            samples = (long) s[4];
            prefillMs = s[5];
            talkerMs = s[6];
            codePredictorMs = s[7];
            codecMs = s[8];
            firstAudioMs = s[9];
            totalMs = s[10];
        }
    }

    private final Object handleLock = new Object();  // guards handle against cancel/close races
    private volatile long handle;
    private final String info;
    private volatile Stats lastStats;
    private final List<TextStream> openStreams = new ArrayList<>();  // guarded by handleLock
    // held (shared) by each running generate, so that close() waits for them
    private final ReentrantReadWriteLock use = new ReentrantReadWriteLock();

    public KazeTts(String talkerPath, String mmprojPath) {
        this(talkerPath, mmprojPath, new Config());
    }

    public KazeTts(String talkerPath, String mmprojPath, Config config) {
        if (talkerPath == null || mmprojPath == null || config == null || config.codecWeights == null) {
            throw new IllegalArgumentException("talkerPath, mmprojPath, config and config.codecWeights are required");
        }
        handle = nativeLoad(utf8(talkerPath), utf8(mmprojPath), config.threads,
                config.codecWeights.ordinal(), config.contextSize, config.codecThreads,
                config.maxBatch, config.queue);
        info = new String(nativeModelInfo(handle), StandardCharsets.UTF_8);
    }

    public int sampleRate() {
        return nativeSampleRate(open());
    }

    /** The model's named speakers (CustomVoice), sorted. */
    public String[] speakers() {
        return jsonStrings("speakers");
    }

    /** "auto" and the model's languages. */
    public String[] languages() {
        return jsonStrings("languages");
    }

    /** Everything the model offers, as JSON (see kz_tts_model_info). */
    public String modelInfo() {
        return info;
    }

    /** Synthesizes the whole text; returns float PCM in [-1, 1] at sampleRate(). */
    public float[] generate(String text, Options options) {
        return run(text, options, null, true).audio;
    }

    /** Streams the text to the callback (first chunk after the first frame); returns its figures. */
    public Stats generate(String text, Options options, ChunkCallback callback) {
        if (callback == null) throw new IllegalArgumentException("callback is required");
        return run(text, options, callback, false).stats;
    }

    /**
     * Speaks text while it is written (an on-device LLM's reply): push() the text as it arrives,
     * then finish(). Only tokens no later text can change are fed, so a text of up to 150
     * characters gives exactly generate()'s codes and samples however it is pushed. The request is
     * checked here (a bad one throws before any compute). The callback (may be null) runs on the
     * stream's own worker thread, never on the pushing one; push() never waits for audio. The
     * stream holds one of the maxBatch seats until it is finished or closed. See
     * kz_tts_stream_begin in kazetts/tts.h.
     */
    public TextStream stream(Options options, ChunkCallback callback) {
        if (options == null) throw new IllegalArgumentException("options are required");
        synchronized (handleLock) {
            long h = nativeStreamBegin(open(), utf8(options.speaker), utf8(options.language),
                    utf8(options.instruct), options.xvector, options.ints(), options.floats(), options.seed, callback);
            TextStream stream = new TextStream(h);
            openStreams.add(stream);
            return stream;
        }
    }

    /** A request whose text is pushed while it is said (see stream()). */
    public final class TextStream implements AutoCloseable {
        private long stream;  // 0 once finished or closed
        private char highSurrogate;  // the first half of a character cut by the last push

        private TextStream(long stream) {
            this.stream = stream;
        }

        /** The next text, cut anywhere (a surrogate pair may be split across pushes). */
        public synchronized void push(String text) {
            if (text == null) throw new IllegalArgumentException("text is required");
            long s = live("push");
            StringBuilder b = new StringBuilder();
            if (highSurrogate != 0) b.append(highSurrogate);
            b.append(text);
            highSurrogate = 0;
            if (b.length() > 0 && Character.isHighSurrogate(b.charAt(b.length() - 1))) {
                highSurrogate = b.charAt(b.length() - 1);
                b.setLength(b.length() - 1);
            }
            nativeStreamPush(s, utf8(b.toString()));
        }

        /** The text has ended: waits until the rest is said and returns the request's figures. */
        public synchronized Stats finish() {
            long s = live("finish");
            if (highSurrogate != 0) throw new IllegalArgumentException("the text ends inside a surrogate pair");
            double[] stats = new double[11];
            try {
                nativeStreamFinish(s, stats);
            } finally {
                release();
            }
            Stats done = new Stats(stats);
            lastStats = done;
            return done;
        }

        /** Stops the request within one frame (any thread); finish() then returns "cancelled". */
        public void cancel() {
            KazeTts.this.cancel();
        }

        /** Cancels the request if it was not finished, and frees it; twice is fine. */
        @Override
        public synchronized void close() {
            if (stream != 0) release();
        }

        private long live(String call) {
            if (stream == 0) throw new IllegalStateException(call + " on a TextStream that is finished or closed");
            return stream;
        }

        private void release() {
            nativeStreamFree(stream);
            stream = 0;
            synchronized (handleLock) {
                openStreams.remove(this);
            }
        }
    }

    /** The codes of the last request that ended, frame-major (16 a frame). */
    public int[] lastCodes() {
        use.readLock().lock();
        try {
            return nativeLastCodes(open());
        } finally {
            use.readLock().unlock();
        }
    }

    /** The figures of the last request that ended. */
    public Stats lastStats() {
        return lastStats;
    }

    /** Stops the running requests within one frame; any thread; a no-op when idle or closed. */
    public void cancel() {
        synchronized (handleLock) {
            if (handle != 0) nativeCancel(handle);
        }
    }

    @Override
    public void close() {
        cancel();
        List<TextStream> running;
        synchronized (handleLock) {
            running = new ArrayList<>(openStreams);
        }
        for (TextStream stream : running) stream.close();  // their workers end before the handle goes
        use.writeLock().lock();  // waits for the running generates
        try {
            synchronized (handleLock) {
                if (handle != 0) {
                    nativeFree(handle);
                    handle = 0;
                }
            }
        } finally {
            use.writeLock().unlock();
        }
    }

    private static final class Outcome {
        final float[] audio;
        final Stats stats;

        Outcome(float[] audio, Stats stats) {
            this.audio = audio;
            this.stats = stats;
        }
    }

    private Outcome run(String text, Options o, ChunkCallback callback, boolean collect) {
        if (text == null) throw new IllegalArgumentException("text is required");
        if (o == null) throw new IllegalArgumentException("options are required");
        double[] stats = new double[11];
        float[] audio;
        use.readLock().lock();
        try {
            if (o.voice == null) {
                audio = nativeSynthesize(open(), utf8(text), utf8(o.speaker), utf8(o.language), utf8(o.instruct),
                        o.xvector, o.ints(), o.floats(), o.seed, callback, collect, stats, 0);
            } else {
                o.voice.use.readLock().lock();  // (not closed while the request reads it)
                try {
                    audio = nativeSynthesize(open(), utf8(text), utf8(o.speaker), utf8(o.language),
                            utf8(o.instruct), o.xvector, o.ints(), o.floats(), o.seed, callback, collect, stats,
                            o.voice.nativeHandle());
                } finally {
                    o.voice.use.readLock().unlock();
                }
            }
        } finally {
            use.readLock().unlock();
        }
        Stats done = new Stats(stats);
        lastStats = done;
        return new Outcome(audio, done);
    }

    private long open() {
        long h = handle;
        if (h == 0) throw new IllegalStateException("this KazeTts is closed");
        return h;
    }

    private static byte[] utf8(String s) {
        return s == null ? null : s.getBytes(StandardCharsets.UTF_8);
    }

    // The string array under "key" in the model info JSON (written by kz_tts_model_info).
    private String[] jsonStrings(String key) {
        int at = info.indexOf("\"" + key + "\": [");
        if (at < 0) throw new IllegalStateException("model info has no " + key);
        List<String> out = new ArrayList<>();
        int i = info.indexOf('[', at) + 1;
        StringBuilder cur = null;
        for (; i < info.length(); i++) {
            char c = info.charAt(i);
            if (cur == null) {
                if (c == ']') break;
                if (c == '"') cur = new StringBuilder();
            } else if (c == '\\') {
                char e = info.charAt(++i);
                if (e == 'u') {
                    cur.append((char) Integer.parseInt(info.substring(i + 1, i + 5), 16));
                    i += 4;
                } else {
                    cur.append(e);
                }
            } else if (c == '"') {
                out.add(cur.toString());
                cur = null;
            } else {
                cur.append(c);
            }
        }
        return out.toArray(new String[0]);
    }

    private static native long nativeDefaultOptions(int[] ints, float[] floats);
    private static native long nativeLoad(byte[] talker, byte[] mmproj, int threads, int codecWeights, int nCtx,
                                          int codecThreads, int maxBatch, int queue);
    private static native void nativeFree(long handle);
    private static native void nativeCancel(long handle);
    private static native byte[] nativeModelInfo(long handle);
    private static native int nativeSampleRate(long handle);
    private static native int[] nativeLastCodes(long handle);
    private static native float[] nativeSynthesize(long handle, byte[] text, byte[] speaker, byte[] language,
            byte[] instruct, float[] xvector, int[] ints, float[] floats, long seed, ChunkCallback callback,
            boolean collect, double[] stats, long voice);
    private static native long nativeStreamBegin(long handle, byte[] speaker, byte[] language, byte[] instruct,
            float[] xvector, int[] ints, float[] floats, long seed, ChunkCallback callback);
    private static native void nativeStreamPush(long stream, byte[] text);
    private static native void nativeStreamFinish(long stream, double[] stats);
    private static native void nativeStreamFree(long stream);

    /**
     * Enrolls a voice (Base models) from a recording: mono float samples in [-1, 1] at any rate of
     * 8000 Hz or more (16, 44.1 and 48 kHz microphones are resampled to 24 kHz by libsoxr, as the
     * Python engine does), and the words said in it for ICL cloning (null: x-vector only). The
     * same voice, bit for bit, as the Python engine's {@code tts.enroll((pcm, sampleRate), refText)}.
     * A recording it cannot use (empty, silent, shorter than the speaker encoder's window, longer
     * than 60 s, below 8000 Hz), an empty refText or a model that is not Base is an
     * {@link IllegalArgumentException} with a one-line message. Close the Voice when done.
     */
    public Voice enroll(float[] pcm, int sampleRate, String refText) {
        return enroll(pcm, sampleRate, refText, 0.0f);
    }

    /** As {@link #enroll(float[], int, String)}, with refSilence seconds (0..2; about 0.5 helps ICL)
     * of silence appended to the recording before encoding. */
    public Voice enroll(float[] pcm, int sampleRate, String refText, float refSilence) {
        if (pcm == null) throw new IllegalArgumentException("pcm is required");
        use.readLock().lock();
        try {
            return new Voice(nativeEnroll(open(), pcm, sampleRate, utf8(refText), refSilence));
        } finally {
            use.readLock().unlock();
        }
    }

    private static native long nativeEnroll(long handle, float[] pcm, int sampleRate, byte[] refText,
            float refSilence);
}
