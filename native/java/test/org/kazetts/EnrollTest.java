package org.kazetts;

import java.io.DataOutputStream;
import java.io.FileOutputStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;

/**
 * KazeTts.enroll on a desktop JVM (run by tests/test_java.py). Usage: EnrollTest TALKER MMPROJ DIR,
 * where DIR holds pcm16k.f32 and pcm44k.f32 (mono float32 LE at 16000 and 44100 Hz) and ref.text
 * (UTF-8). Writes java_icl.voice (ICL, from 16 kHz), java_xv.voice (x-vector only, from 44.1 kHz)
 * and java_icl.codes (int32 LE: a greedy request with that voice) for Python to compare with its
 * own enroll and synthesis. Prints PASS/FAIL per check; exits 1 on any failure.
 */
public final class EnrollTest {
    private static float[] floats(Path p) throws Exception {
        ByteBuffer b = ByteBuffer.wrap(Files.readAllBytes(p)).order(ByteOrder.LITTLE_ENDIAN);
        float[] out = new float[b.remaining() / 4];
        b.asFloatBuffer().get(out);
        return out;
    }

    // an IllegalArgumentException whose one-line message holds `words`
    private static void refused(String name, String words, KazeTtsTest.Body body) {
        try {
            body.run();
            KazeTtsTest.check(name, false, "no exception");
        } catch (Throwable t) {
            String m = String.valueOf(t.getMessage());
            KazeTtsTest.check(name, t instanceof IllegalArgumentException && m.contains(words) && !m.contains("\n"),
                    t.getClass().getSimpleName() + ": " + m);
        }
    }

    public static void main(String[] args) throws Exception {
        Path dir = Paths.get(args[2]);
        float[] pcm16 = floats(dir.resolve("pcm16k.f32"));
        float[] pcm44 = floats(dir.resolve("pcm44k.f32"));
        String text = new String(Files.readAllBytes(dir.resolve("ref.text")), "UTF-8");
        try (KazeTts tts = new KazeTts(args[0], args[1])) {
            try (Voice icl = tts.enroll(pcm16, 16000, text); Voice xv = tts.enroll(pcm44, 44100, null)) {
                KazeTtsTest.check("icl voice", icl.hasIcl() && text.equals(icl.refText()), String.valueOf(icl.refText()));
                KazeTtsTest.check("x-vector voice", !xv.hasIcl() && xv.refCodes() == null, "");
                icl.save(dir.resolve("java_icl.voice").toString(), true);
                xv.save(dir.resolve("java_xv.voice").toString(), true);
                KazeTts.Options o = new KazeTts.Options();
                o.voice = icl;
                o.language = "english";
                o.greedy = true;
                o.maxFrames = 6;
                tts.generate("Hello there.", o);
                try (DataOutputStream out = new DataOutputStream(new FileOutputStream(dir.resolve("java_icl.codes").toFile()))) {
                    for (int c : tts.lastCodes()) out.writeInt(Integer.reverseBytes(c));
                }
                KazeTtsTest.check("synthesized with the voice", tts.lastCodes().length > 0, "");
            }
            refused("rate below 8000 Hz", "too low to clone a voice from", () -> tts.enroll(pcm16, 4000, null));
            refused("empty audio", "the audio is empty", () -> tts.enroll(new float[0], 16000, null));
            refused("empty ref_text", "ref_text is empty", () -> tts.enroll(pcm16, 16000, "  "));
            refused("silent audio", "the audio is silent", () -> tts.enroll(new float[16000], 16000, null));
            try (Voice foreign = Voice.load(dir.resolve("foreign.voice").toString())) {
                KazeTts.Options o = new KazeTts.Options();
                o.voice = foreign;
                refused("a voice of another model", "this voice was made for another speaker encoder",
                        () -> tts.generate("Hello.", o));
            }
        }
        System.out.println(KazeTtsTest.failures == 0 ? "ALL PASSED" : KazeTtsTest.failures + " FAILED");
        System.exit(KazeTtsTest.failures == 0 ? 0 : 1);
    }
}
