package org.kazetts;

/** A native failure that is not a bad argument: a bad model file, an I/O or compute error. */
public class KazeTtsException extends RuntimeException {
    private final int status;

    public KazeTtsException(String message, int status) {
        super(message);
        this.status = status;
    }

    /** The kz_status code (see kazetts/common.h). */
    public int status() {
        return status;
    }
}
