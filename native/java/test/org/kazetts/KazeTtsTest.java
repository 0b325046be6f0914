package org.kazetts;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Base64;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * KazeTts on a desktop JVM (run by tests/test_java.py, which writes the expected results of
 * the Python engine). Usage: KazeTtsTest TALKER MMPROJ CASES_DIR. CASES_DIR/cases.tsv has one
 * line per request: name, text (base64 UTF-8), speaker, language, greedy, seed, max_frames,
 * text_streaming, temperature, top_k, top_p, repetition_penalty, cp_temperature,
 * cp_top_k, cp_top_p, speed ("-": the Options default);
 * NAME.codes (int32 LE) and NAME.pcm (float32 LE) are the Python engine's output for it.
 * Prints PASS/FAIL per check; exits 1 on any failure.
 */
public final class KazeTtsTest {
    static int failures = 0;

    static void check(String name, boolean ok, String detail) {
        System.out.println((ok ? "PASS " : "FAIL ") + name + (detail.isEmpty() ? "" : ": " + detail));
        if (!ok) failures++;
    }

    interface Body {
        void run() throws Exception;
    }

    private static void expectThrows(String name, Class<? extends Throwable> type, Body body) {
        try {
            body.run();
            check(name, false, "no exception");
        } catch (Throwable t) {
            check(name, type.isInstance(t), t.getClass().getSimpleName() + ": " + t.getMessage());
        }
    }

    private static String field(String s) {
        return s.equals("-") ? null : s;
    }

    private static KazeTts.Options options(String[] f) {
        KazeTts.Options o = new KazeTts.Options();
        o.speaker = field(f[2]);
        o.language = f[3];
        o.greedy = f[4].equals("1");
        o.seed = Long.parseLong(f[5]);
        o.maxFrames = Integer.parseInt(f[6]);
        o.textStreaming = f[7].equals("1");
        if (!f[8].equals("-")) o.temperature = Float.parseFloat(f[8]);
        if (!f[9].equals("-")) o.topK = Integer.parseInt(f[9]);
        if (!f[10].equals("-")) o.topP = Float.parseFloat(f[10]);
        if (!f[11].equals("-")) o.repetitionPenalty = Float.parseFloat(f[11]);
        if (!f[12].equals("-")) o.cpTemperature = Float.parseFloat(f[12]);
        if (!f[13].equals("-")) o.cpTopK = Integer.parseInt(f[13]);
        if (!f[14].equals("-")) o.cpTopP = Float.parseFloat(f[14]);
        if (!f[15].equals("-")) o.speed = Float.parseFloat(f[15]);
        return o;
    }

    private static int[] readInts(Path p) throws IOException {
        ByteBuffer b = ByteBuffer.wrap(Files.readAllBytes(p)).order(ByteOrder.LITTLE_ENDIAN);
        int[] out = new int[b.remaining() / 4];
        b.asIntBuffer().get(out);
        return out;
    }

    private static float[] readFloats(Path p) throws IOException {
        ByteBuffer b = ByteBuffer.wrap(Files.readAllBytes(p)).order(ByteOrder.LITTLE_ENDIAN);
        float[] out = new float[b.remaining() / 4];
        b.asFloatBuffer().get(out);
        return out;
    }

    private static float[] concat(List<float[]> parts) {
        int n = 0;
        for (float[] p : parts) n += p.length;
        float[] out = new float[n];
        int at = 0;
        for (float[] p : parts) {
            System.arraycopy(p, 0, out, at, p.length);
            at += p.length;
        }
        return out;
    }

    public static void main(String[] args) throws Exception {
        String talker = args[0], mmproj = args[1];
        Path dir = Paths.get(args[2]);
        KazeTts.Config config = new KazeTts.Config();
        config.codecWeights = KazeTts.CodecWeights.F32;
        KazeTts tts = new KazeTts(talker, mmproj, config);

        check("sample rate", tts.sampleRate() == 24000, "" + tts.sampleRate());
        check("speakers", Arrays.asList(tts.speakers()).contains("vivian"), Arrays.toString(tts.speakers()));
        check("languages", tts.languages()[0].equals("auto") && Arrays.asList(tts.languages()).contains("french"),
                Arrays.toString(tts.languages()));

        // every request the Python engine answered: the same codes and the same samples
        String[] first = null;
        for (String line : Files.readAllLines(dir.resolve("cases.tsv"), StandardCharsets.UTF_8)) {
            String[] f = line.split("\t");
            if (first == null) first = f;
            String text = new String(Base64.getDecoder().decode(f[1]), StandardCharsets.UTF_8);
            float[] audio = tts.generate(text, options(f));
            int[] codes = tts.lastCodes();
            int[] wantCodes = readInts(dir.resolve(f[0] + ".codes"));
            float[] wantAudio = readFloats(dir.resolve(f[0] + ".pcm"));
            check(f[0] + " codes", Arrays.equals(codes, wantCodes), (codes.length / 16) + " frames, Python engine "
                    + (wantCodes.length / 16));
            check(f[0] + " samples", Arrays.equals(audio, wantAudio), audio.length + " samples, Python engine "
                    + wantAudio.length);
        }

        // text streamed in word by word (an LLM's reply): the Python engine's codes and samples
        String[] streaming = null;  // a request in the streaming-text mode
        for (String line : Files.readAllLines(dir.resolve("cases.tsv"), StandardCharsets.UTF_8)) {
            String[] f = line.split("\t");
            if (!f[0].equals("sampled_seed3") && !f[0].equals("emoji")) continue;
            streaming = f;
            String text = new String(Base64.getDecoder().decode(f[1]), StandardCharsets.UTF_8);
            List<float[]> heard = new ArrayList<>();
            List<int[]> heardCodes = new ArrayList<>();
            KazeTts.Stats streamed;
            try (KazeTts.TextStream stream = tts.stream(options(f), (samples, codes, soFar) -> {
                heard.add(samples);
                heardCodes.add(codes);
                return true;
            })) {
                String[] words = text.split(" ");
                for (int i = 0; i < words.length; i++) stream.push(i == 0 ? words[i] : " " + words[i]);
                streamed = stream.finish();
                expectThrows("push after finish", IllegalStateException.class, () -> stream.push("more"));
                expectThrows("finish twice", IllegalStateException.class, stream::finish);
            }
            int[] wantCodes = readInts(dir.resolve(f[0] + ".codes"));
            float[] wantAudio = readFloats(dir.resolve(f[0] + ".pcm"));
            int[] codes = heardCodes.stream().flatMapToInt(Arrays::stream).toArray();
            check(f[0] + " text stream codes", Arrays.equals(codes, wantCodes) && Arrays.equals(tts.lastCodes(), wantCodes),
                    (codes.length / 16) + " frames, Python engine " + (wantCodes.length / 16));
            check(f[0] + " text stream samples", Arrays.equals(concat(heard), wantAudio) && streamed.samples == wantAudio.length,
                    concat(heard).length + " samples, Python engine " + wantAudio.length);
        }

        final String[] base = first, streamCase = streaming;
        // streaming: the first frame alone, then chunkFrames a chunk; the chunks make generate()'s audio
        String text = new String(Base64.getDecoder().decode(base[1]), StandardCharsets.UTF_8);
        KazeTts.Options o = options(base);
        o.maxFrames = 11;
        float[] whole = tts.generate(text, o);
        List<float[]> chunks = new ArrayList<>();
        List<Integer> frames = new ArrayList<>();
        KazeTts.Stats stats = tts.generate(text, o, (samples, codes, soFar) -> {
            chunks.add(samples);
            frames.add(soFar);
            return codes.length > 0;
        });
        check("stream chunk frames", frames.equals(Arrays.asList(1, 5, 9, 11)), frames.toString());
        check("stream equals generate", Arrays.equals(concat(chunks), whole), "");
        check("stream stats", stats.frames == 11 && stats.firstAudioMs >= 0 && stats.firstAudioMs <= stats.totalMs,
                stats.stopReason + ", " + stats.frames + " frames");

        // cancel from another thread mid-utterance, then the same handle synthesizes again
        o.maxFrames = 40;
        o.chunkFrames = 1;
        AtomicInteger calls = new AtomicInteger();
        KazeTts.Stats cancelled = tts.generate(text, o, (samples, codes, soFar) -> {
            if (calls.incrementAndGet() == 2) {
                Thread t = new Thread(tts::cancel);
                t.start();
                try {
                    t.join();
                } catch (InterruptedException e) {
                    throw new RuntimeException(e);
                }
            }
            return true;
        });
        check("cancel from another thread", cancelled.stopReason.equals("cancelled") && cancelled.frames == 2,
                cancelled.stopReason + " after " + cancelled.frames + " frames (cancelled during frame 2)");
        o.maxFrames = 11;
        o.chunkFrames = 4;
        check("synthesize again after cancel", Arrays.equals(tts.generate(text, o), whole), "");

        // cancel from a thread that does not wait for the callback: generate returns within one
        // frame of cancel() (frames are counted as the callback sees them), then the handle works
        o.maxFrames = 40;
        o.chunkFrames = 1;
        AtomicInteger seen = new AtomicInteger();
        CountDownLatch second = new CountDownLatch(1);
        AtomicInteger seenAtCancel = new AtomicInteger(-1);
        Thread canceller = new Thread(() -> {
            try {
                second.await();
            } catch (InterruptedException e) {
                return;
            }
            tts.cancel();
            seenAtCancel.set(seen.get());
        });
        canceller.start();
        KazeTts.Stats async = tts.generate(text, o, (samples, codes, soFar) -> {
            seen.set(soFar);
            if (soFar == 2) second.countDown();
            return true;
        });
        canceller.join();
        check("cancel mid-utterance returns within one frame", async.stopReason.equals("cancelled")
                && async.frames <= seenAtCancel.get() + 1 && async.frames < 40,
                async.stopReason + " after " + async.frames + " frames, " + seenAtCancel.get() + " seen when cancel() returned");
        o.maxFrames = 11;
        o.chunkFrames = 4;
        check("synthesize again after an asynchronous cancel", Arrays.equals(tts.generate(text, o), whole), "");
        KazeTts.Stats stopped = tts.generate(text, o, (samples, codes, soFar) -> false);
        check("callback returning false stops", stopped.stopReason.equals("cancelled") && stopped.frames == 1,
                stopped.stopReason + " after " + stopped.frames + " frames");
        expectThrows("callback exception propagates", IllegalStateException.class, () -> tts.generate(text, o,
                (samples, codes, soFar) -> {
                    throw new IllegalStateException("from the callback");
                }));
        check("usable after a callback exception", Arrays.equals(tts.generate(text, o), whole), "");

        // minFrames: a piece the tiny model ends itself runs on past its end-of-speech, on the same path
        KazeTts.Options m = new KazeTts.Options();
        m.speaker = "vivian";
        m.greedy = true;
        m.textStreaming = false;
        m.maxFrames = 60;
        check("minFrames default", m.minFrames == 2, "" + m.minFrames);
        KazeTts.Stats endStats = tts.generate("Bonjour.", m, (samples, codes, soFar) -> true);
        int[] ended = tts.lastCodes();
        m.minFrames = m.maxFrames = ended.length / 16 + 5;
        tts.generate("Bonjour.", m);
        int[] longer = tts.lastCodes();
        check("minFrames bans end-of-speech", endStats.stopReason.equals("eos") && longer.length == 16 * m.maxFrames
                && Arrays.equals(Arrays.copyOf(longer, ended.length), ended),
                endStats.stopReason + " after " + ended.length / 16 + " frames; " + longer.length / 16 + " with minFrames");
        m.minFrames = -1;
        expectThrows("negative minFrames", IllegalArgumentException.class, () -> tts.generate("Bonjour.", m));

        // a text stream's states: one request at a time, push after close, an empty stream, a bad request
        KazeTts.TextStream open = tts.stream(options(streamCase), null);
        expectThrows("generate while a text stream runs", IllegalStateException.class, () -> tts.generate(text, o));
        open.push("Bonjour ");
        open.close();
        expectThrows("push after close", IllegalStateException.class, () -> open.push("more"));
        open.close();
        check("usable after a closed text stream", Arrays.equals(tts.generate(text, o), whole), "");
        try (KazeTts.TextStream empty = tts.stream(options(streamCase), null)) {
            empty.push(" \n");
            expectThrows("empty text stream", IllegalArgumentException.class, empty::finish);
        }
        KazeTts.Options badStream = options(streamCase);
        badStream.speaker = "nobody";
        expectThrows("text stream with an unknown speaker", IllegalArgumentException.class,
                () -> tts.stream(badStream, null));
        KazeTts.TextStream cancelledStream = tts.stream(options(streamCase), (samples, codes, soFar) -> true);
        cancelledStream.push("Bonjour ");
        cancelledStream.cancel();
        KazeTts.Stats cancelledStats = cancelledStream.finish();
        check("text stream cancel", cancelledStats.stopReason.equals("cancelled"), cancelledStats.stopReason);

        // bad arguments are exceptions, before any audio
        KazeTts.Options bad = options(base);
        bad.speaker = "nobody";
        expectThrows("unknown speaker", IllegalArgumentException.class, () -> tts.generate(text, bad));
        KazeTts.Options badLang = options(base);
        badLang.language = "klingon";
        expectThrows("unknown language", IllegalArgumentException.class, () -> tts.generate(text, badLang));
        KazeTts.Options badChunk = options(base);
        badChunk.chunkFrames = 0;
        expectThrows("chunkFrames 0", IllegalArgumentException.class, () -> tts.generate(text, badChunk));
        KazeTts.Options badTemp = options(base);
        badTemp.greedy = false;
        badTemp.temperature = 0f;
        expectThrows("temperature 0", IllegalArgumentException.class, () -> tts.generate(text, badTemp));
        KazeTts.Options greedyTemp = options(base);
        greedyTemp.greedy = true;
        greedyTemp.temperature = 0f;
        expectThrows("temperature 0 even when greedy", IllegalArgumentException.class, () -> tts.generate(text, greedyTemp));
        KazeTts.Options badTopK = options(base);
        badTopK.topK = -1;
        expectThrows("topK -1", IllegalArgumentException.class, () -> tts.generate(text, badTopK));
        KazeTts.Options badTopP = options(base);
        badTopP.topP = 1.5f;
        expectThrows("topP 1.5", IllegalArgumentException.class, () -> tts.generate(text, badTopP));
        KazeTts.Options badPenalty = options(base);
        badPenalty.repetitionPenalty = Float.NaN;
        expectThrows("repetitionPenalty NaN", IllegalArgumentException.class, () -> tts.generate(text, badPenalty));
        KazeTts.Options badSub = options(base);
        badSub.cpTemperature = -1f;
        expectThrows("cpTemperature -1", IllegalArgumentException.class, () -> tts.generate(text, badSub));
        KazeTts.Options badMax = options(base);
        badMax.maxFrames = -1;
        expectThrows("maxFrames -1", IllegalArgumentException.class, () -> tts.generate(text, badMax));
        KazeTts.Options badX = options(base);
        badX.speaker = null;
        badX.xvector = new float[3];
        expectThrows("x-vector of the wrong length", IllegalArgumentException.class, () -> tts.generate(text, badX));
        expectThrows("null callback", IllegalArgumentException.class, () -> tts.generate(text, options(base), null));
        expectThrows("empty text", IllegalArgumentException.class, () -> tts.generate("  ", options(base)));
        expectThrows("null text", IllegalArgumentException.class, () -> tts.generate(null, options(base)));
        expectThrows("null options", IllegalArgumentException.class, () -> tts.generate(text, null));
        expectThrows("missing model file", KazeTtsException.class, () ->
                new KazeTts(talker + ".missing", mmproj));
        expectThrows("null model path", IllegalArgumentException.class, () -> new KazeTts(null, mmproj));
        KazeTts.Config noThreads = new KazeTts.Config();
        noThreads.threads = 0;
        expectThrows("threads 0", IllegalArgumentException.class, () -> new KazeTts(talker, mmproj, noThreads));
        KazeTts.Config noCodec = new KazeTts.Config();
        noCodec.codecWeights = null;
        expectThrows("codecWeights null", IllegalArgumentException.class, () -> new KazeTts(talker, mmproj, noCodec));
        check("usable after bad requests", Arrays.equals(tts.generate(text, o), whole), "");

        // codecThreads: the codec on its own thread (1) gives serial's (0) samples and chunks; a
        // stop from the callback ends the request there, and the handle closes with no thread left
        for (int codecThreads : new int[] {0, 1}) {
            KazeTts.Config c = new KazeTts.Config();
            c.codecWeights = KazeTts.CodecWeights.F32;
            c.codecThreads = codecThreads;
            try (KazeTts t = new KazeTts(talker, mmproj, c)) {
                List<float[]> parts = new ArrayList<>();
                List<Integer> at = new ArrayList<>();
                t.generate(text, o, (samples, codes, soFar) -> {
                    parts.add(samples);
                    at.add(soFar);
                    return true;
                });
                check("codecThreads " + codecThreads + " streams serial's samples", Arrays.equals(concat(parts), whole)
                        && at.equals(Arrays.asList(1, 5, 9, 11)), at.toString());
                KazeTts.Stats s = t.generate(text, o, (samples, codes, soFar) -> soFar < 5);
                check("codecThreads " + codecThreads + " stops where the callback says", s.stopReason.equals("cancelled")
                        && s.frames == 5, s.stopReason + " after " + s.frames + " frames");
            }
        }
        KazeTts.Config tooMany = new KazeTts.Config();
        tooMany.codecThreads = 513;
        expectThrows("codecThreads 513", IllegalArgumentException.class, () -> new KazeTts(talker, mmproj, tooMany));

        // F16_SUMS (kz_codec_weights 2): float16 sums on ARM cores with FP16 arithmetic, F16's samples elsewhere
        KazeTts.Config f16 = new KazeTts.Config(), sums = new KazeTts.Config();
        sums.codecWeights = KazeTts.CodecWeights.F16_SUMS;
        try (KazeTts a = new KazeTts(talker, mmproj, f16); KazeTts b = new KazeTts(talker, mmproj, sums)) {
            float[] plain = a.generate(text, o), summed = b.generate(text, o);
            boolean x86 = System.getProperty("os.arch").matches("amd64|x86_64");
            check("F16_SUMS: F16's codes" + (x86 ? " and samples (x86-64)" : ""),
                    Arrays.equals(a.lastCodes(), b.lastCodes()) && (!x86 || Arrays.equals(plain, summed)),
                    plain.length + " and " + summed.length + " samples");
        }

        // maxBatch 2: two requests from two threads at once, each the Python engine's codes and samples
        List<String[]> two = new ArrayList<>();
        for (String line : Files.readAllLines(dir.resolve("cases.tsv"), StandardCharsets.UTF_8)) {
            if (two.size() < 2) two.add(line.split("\t"));
        }
        KazeTts.Config batched = new KazeTts.Config();
        batched.codecWeights = KazeTts.CodecWeights.F32;
        batched.maxBatch = 2;
        try (KazeTts pair = new KazeTts(talker, mmproj, batched)) {
            List<List<float[]>> heard = Arrays.asList(new ArrayList<>(), new ArrayList<>());
            List<List<int[]>> heardCodes = Arrays.asList(new ArrayList<>(), new ArrayList<>());
            CountDownLatch both = new CountDownLatch(2);
            Thread[] threads = new Thread[2];
            for (int i = 0; i < 2; i++) {
                final int k = i;
                final String[] f = two.get(k);
                threads[k] = new Thread(() -> {
                    both.countDown();
                    try {
                        both.await();
                    } catch (InterruptedException e) {
                        return;
                    }
                    pair.generate(new String(Base64.getDecoder().decode(f[1]), StandardCharsets.UTF_8), options(f),
                            (samples, codes, soFar) -> heard.get(k).add(samples) && heardCodes.get(k).add(codes));
                });
                threads[k].start();
            }
            for (Thread t : threads) t.join();
            for (int k = 0; k < 2; k++) {
                String[] f = two.get(k);
                int[] codes = heardCodes.get(k).stream().flatMapToInt(Arrays::stream).toArray();
                check("maxBatch 2, " + f[0] + " beside another", Arrays.equals(codes, readInts(dir.resolve(f[0] + ".codes")))
                        && Arrays.equals(concat(heard.get(k)), readFloats(dir.resolve(f[0] + ".pcm"))),
                        (codes.length / 16) + " frames");
            }
        }
        KazeTts.Config tooBig = new KazeTts.Config();
        tooBig.maxBatch = 17;
        expectThrows("maxBatch 17", IllegalArgumentException.class, () -> new KazeTts(talker, mmproj, tooBig));

        tts.close();
        tts.close();
        check("close twice", true, "");
        tts.cancel();
        check("cancel after close is a no-op", true, "");
        expectThrows("use after close", IllegalStateException.class, () -> tts.generate(text, options(base)));

        System.out.println(failures == 0 ? "ALL PASSED" : failures + " FAILED");
        System.exit(failures == 0 ? 0 : 1);
    }
}
