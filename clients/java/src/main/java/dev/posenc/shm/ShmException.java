package dev.posenc.shm;

import dev.posenc.PosencException;

/**
 * A shared-memory table could not be attached or read. {@link #code()} is the reason, one for
 * each of the C reader's {@code POSENC_SHM_E*} codes, and the message names the file and uses the
 * words of docs/shm-format.md ("bad magic", "inconsistent header: ...", "data checksum mismatch"),
 * as the Python and C readers do. The field is "name", "registry" or "segment".
 */
public class ShmException extends PosencException {
    private static final long serialVersionUID = 1L;

    /** Why, as posenc_shm.h numbers it. */
    public enum Code {
        /** The name is not 1..64 of [A-Za-z0-9_.-], or contains "..". */
        BAD_NAME,
        /** No registry, or no table of that name. */
        NOT_FOUND,
        /** Opening, reading or mapping a file failed. */
        OS,
        /** The file is shorter than its header says. */
        TRUNCATED,
        /** Not a posenc segment. */
        MAGIC,
        /** A format version this reader does not know. */
        VERSION,
        /** Not READY (being written, or its writer died). */
        STATE,
        /** Inconsistent header, trailing bytes, padding, header CRC or spec hash mismatch. */
        HEADER,
        /** The data checksum does not match. */
        CHECKSUM,
        /** The registry is unreadable or of an unknown layout. */
        REGISTRY,
        /** A registry slot stayed busy, or the table kept being replaced. */
        BUSY
    }

    private final Code code;

    public ShmException(Code code, String field, String detail) {
        super(field, detail);
        this.code = code;
    }

    public ShmException(Code code, String field, String detail, Throwable cause) {
        super(field, detail, cause);
        this.code = code;
    }

    public Code code() {
        return code;
    }
}
