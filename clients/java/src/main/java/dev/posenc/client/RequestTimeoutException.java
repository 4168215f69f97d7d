package dev.posenc.client;

import dev.posenc.PosencException;

/**
 * No reply within the request timeout ({@link PosencClient.Builder#requestTimeout}). The field is
 * "timeout". The connection stays open (a late reply is discarded when it arrives).
 */
public class RequestTimeoutException extends PosencException {
    private static final long serialVersionUID = 1L;

    public RequestTimeoutException(String detail) {
        super("timeout", detail);
    }
}
