package org.kazetts;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.Arrays;

/**
 * org.kazetts.Voice on a desktop JVM (run by tests/test_java.py). Usage: VoiceTest DIR, where DIR
 * holds python.voice (written by kazetts.Voice.save), python.seal, python.xvector (float32 LE),
 * python.codes (int32 LE), python.text (UTF-8) and tampered.voice (a changed byte). Writes
 * java.voice (for Python to read back). Prints PASS/FAIL per check; exits 1 on any failure.
 */
public final class VoiceTest {
    private static void check(String name, boolean ok, String detail) {
        KazeTtsTest.check(name, ok, detail);
    }

    // the exception, its words, on one line
    private static void expectThrows(String name, Class<? extends Throwable> type, String words, KazeTtsTest.Body body) {
        try {
            body.run();
            check(name, false, "no exception");
        } catch (Throwable t) {
            String m = String.valueOf(t.getMessage());
            check(name, type.isInstance(t) && m.contains(words) && !m.contains("\n"),
                    t.getClass().getSimpleName() + ": " + m);
        }
    }

    public static void main(String[] args) throws Exception {
        Path dir = Paths.get(args[0]);
        ByteBuffer xv = ByteBuffer.wrap(Files.readAllBytes(dir.resolve("python.xvector"))).order(ByteOrder.LITTLE_ENDIAN);
        float[] xvector = new float[xv.remaining() / 4];
        xv.asFloatBuffer().get(xvector);
        ByteBuffer cb = ByteBuffer.wrap(Files.readAllBytes(dir.resolve("python.codes"))).order(ByteOrder.LITTLE_ENDIAN);
        int[] codes = new int[cb.remaining() / 4];
        cb.asIntBuffer().get(codes);
        String seal = new String(Files.readAllBytes(dir.resolve("python.seal")), "UTF-8");
        String text = new String(Files.readAllBytes(dir.resolve("python.text")), "UTF-8");

        try (Voice v = Voice.load(dir.resolve("python.voice").toString())) {
            check("seal", v.payloadSha256().equals(seal), v.payloadSha256());
            check("xvector", Arrays.equals(v.xvector(), xvector), "");
            check("ref codes", Arrays.equals(v.refCodes(), codes), "");
            check("ref text", text.equals(v.refText()), String.valueOf(v.refText()));
            check("icl", v.hasIcl() && v.modelType().equals("base"), v.modelType());
            v.save(dir.resolve("java.voice").toString());
            Path existing = dir.resolve("existing.voice");
            Files.write(existing, new byte[] {1, 2, 3});
            expectThrows("save refuses an existing file", KazeTtsException.class, "exists",
                    () -> v.save(existing.toString()));
            check("the existing file is left as it was", Arrays.equals(Files.readAllBytes(existing), new byte[] {1, 2, 3}), "");
            v.save(existing.toString(), true);
            try (Voice again = Voice.load(existing.toString())) {
                check("save(replace) replaces", again.payloadSha256().equals(seal), "");
            }
            v.close();
            v.close();
            expectThrows("a closed voice", IllegalStateException.class, "closed", v::xvector);
        }
        expectThrows("a tampered file", IllegalArgumentException.class, "does not match its digest",
                () -> Voice.load(dir.resolve("tampered.voice").toString()));
        expectThrows("a missing file", KazeTtsException.class, "cannot read the voice file",
                () -> Voice.load(dir.resolve("missing.voice").toString()));
        expectThrows("a null path", IllegalArgumentException.class, "path is required", () -> Voice.load(null));
        System.out.println(KazeTtsTest.failures == 0 ? "ALL PASSED" : KazeTtsTest.failures + " FAILED");
        System.exit(KazeTtsTest.failures == 0 ? 0 : 1);
    }
}
