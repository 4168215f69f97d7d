package dev.posenc.client;

import dev.posenc.PosencException;

/**
 * Bad input refused by the client before anything was sent: a frame that could not carry it
 * (an inline spec whose arrays disagree with its counts, more positions than a frame can hold),
 * an unknown dtype, a missing argument. {@link #field()} names it as the server would
 * ("spec.freqs", "positions", "dtype", "name"). Values the wire can carry (a position outside a
 * table, a bad table name) go to the server, whose answer is a {@link ServerException}.
 */
public class InvalidInputException extends PosencException {
    private static final long serialVersionUID = 1L;

    public InvalidInputException(String field, String detail) {
        super(field, detail);
    }
}
