package dev.posenc.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.posenc.PosencException;

import org.junit.jupiter.api.Test;

/** Error frames become the ServerException subclass of their status, with field and message. */
class ErrorsTest {
    @Test
    void everyStatusHasItsOwnSubclassCarryingCodeFieldAndMessage() {
        Class<?>[] expected = {null, ServerException.BadFrame.class, ServerException.BadVersion.class,
            ServerException.UnknownOpcode.class, ServerException.FrameTooLarge.class,
            ServerException.TooManyPositions.class, ServerException.UnknownTable.class,
            ServerException.PositionOutOfRange.class, ServerException.BadArgument.class,
            ServerException.OutputTooLarge.class, ServerException.TooManyConnections.class,
            ServerException.ShuttingDown.class, ServerException.TableUnavailable.class,
            ServerException.Internal.class, ServerException.IdleTimeout.class};
        for (Status s : Status.values()) {
            if (s == Status.OK) {
                continue;
            }
            ServerException e = ServerException.of(s.code(), "positions: element 3 is 5000", 9);
            assertEquals(expected[s.code()], e.getClass(), s.name());
            assertEquals(s.code(), e.statusCode());
            assertEquals(s, e.status());
            assertEquals(s.name(), e.statusName());
            assertEquals("positions", e.field());
            assertEquals("element 3 is 5000", e.detail());
            assertEquals("positions: element 3 is 5000", e.getMessage());
            assertEquals(9, e.requestId());
            assertEquals(s.closes(), e.closesConnection(), s.name());
            assertTrue(e instanceof PosencException);
        }
    }

    @Test
    void theStatusesThatCloseAreTheDocumentedSeven() {
        int closing = 0;
        for (Status s : Status.values()) {
            closing += s.closes() ? 1 : 0;
        }
        assertEquals(7, closing);
        assertTrue(Status.IDLE_TIMEOUT.closes() && Status.SHUTTING_DOWN.closes() && Status.FRAME_TOO_LARGE.closes());
        assertFalse(Status.UNKNOWN_TABLE.closes() || Status.BAD_ARGUMENT.closes() || Status.INTERNAL.closes());
    }

    @Test
    void theFieldIsTextBeforeTheFirstColonSpace() {
        ServerException e = ServerException.of(8, "spec.sin_base: sin_base 2 + n_freq 3 = 5 is past: the end", 1);
        assertEquals("spec.sin_base", e.field());
        assertEquals("sin_base 2 + n_freq 3 = 5 is past: the end", e.detail());
        ServerException bare = ServerException.of(13, "out of memory", 1);
        assertEquals("request", bare.field());
        assertEquals("out of memory", bare.detail());
    }

    @Test
    void anUnknownStatusIsAPlainServerErrorThatCloses() {
        ServerException e = ServerException.of(99, "something: new", 0);
        assertEquals(ServerException.class, e.getClass());
        assertNull(e.status());
        assertEquals("STATUS_99", e.statusName());
        assertTrue(e.closesConnection());
    }
}
