package org.kazetts;

import java.nio.charset.StandardCharsets;
import java.util.concurrent.locks.ReentrantReadWriteLock;

/**
 * A cloned voice (Base models) and its {@code .voice} file, over libkazetts' kazetts/voice.h: the
 * same files the Python side writes ({@code kazetts enroll}, {@code kazetts.Voice.save}), read and
 * written by the same code.
 *
 * <p>A damaged file, another kind of file or a changed byte (the file's seal does not match) is
 * an {@link IllegalArgumentException} or a {@link KazeTtsException} with a one-line message naming
 * the file; a voice made for another model is refused when a request uses it. Close a Voice to
 * free it now (closing twice is allowed); an unclosed one lives until the process ends.
 */
public final class Voice implements AutoCloseable {
    static {
        System.loadLibrary("kazetts_jni");
    }

    private volatile long handle;

    Voice(long handle) {
        this.handle = handle;
    }

    /** Reads a voice file. */
    public static Voice load(String path) {
        if (path == null) throw new IllegalArgumentException("path is required");
        return new Voice(nativeRead(utf8(path)));
    }

    /** Saves the voice file without replacing an existing one (an IOException-like KazeTtsException). */
    public void save(String path) {
        save(path, false);
    }

    /**
     * Saves the voice file: written beside {@code path}, then renamed over it ({@code replace}) or
     * put there only when no file is ({@code !replace}). A failure leaves any old file as it was.
     */
    public synchronized void save(String path, boolean replace) {
        if (path == null) throw new IllegalArgumentException("path is required");
        nativeSave(open(), utf8(path), replace);
    }

    /** The speaker x-vector (the model's hidden size). */
    public synchronized float[] xvector() {
        return nativeXvector(open());
    }

    /** The reference's transcript (ICL), or null. */
    public synchronized String refText() {
        byte[] text = nativeText(open(), 0);
        return text == null ? null : new String(text, StandardCharsets.UTF_8);
    }

    /** The reference's codec codes, frame-major (16 a frame), or null. */
    public synchronized int[] refCodes() {
        return nativeRefCodes(open());
    }

    /** Whether the voice can clone in ICL mode (reference text and codes). */
    public boolean hasIcl() {
        return refText() != null && !refText().isEmpty() && refCodes() != null;
    }

    /** The model type it was made for ("base"). */
    public synchronized String modelType() {
        return new String(nativeText(open(), 1), StandardCharsets.UTF_8);
    }

    /** Its model's speaker encoder digest. */
    public synchronized String speakerEncoderSha256() {
        return new String(nativeText(open(), 2), StandardCharsets.UTF_8);
    }

    /** The seal of its content (what the file carries). */
    public synchronized String payloadSha256() {
        return new String(nativeText(open(), 3), StandardCharsets.UTF_8);
    }

    /** The recording's length in seconds. */
    public synchronized float refSeconds() {
        return nativeRefSeconds(open());
    }

    long nativeHandle() {
        return open();
    }

    // held (shared) by each request that reads the voice, so that close() waits for them
    final ReentrantReadWriteLock use = new ReentrantReadWriteLock();

    @Override
    public synchronized void close() {
        use.writeLock().lock();
        try {
            if (handle != 0) {
                nativeFree(handle);
                handle = 0;
            }
        } finally {
            use.writeLock().unlock();
        }
    }

    private long open() {
        long h = handle;
        if (h == 0) throw new IllegalStateException("this Voice is closed");
        return h;
    }

    private static byte[] utf8(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    private static native long nativeRead(byte[] path);
    private static native void nativeSave(long handle, byte[] path, boolean replace);
    private static native void nativeFree(long handle);
    private static native float[] nativeXvector(long handle);
    private static native int[] nativeRefCodes(long handle);
    // 0: ref_text (null when none), 1: model type, 2: speaker encoder digest, 3: the seal
    private static native byte[] nativeText(long handle, int which);
    private static native float nativeRefSeconds(long handle);
}
