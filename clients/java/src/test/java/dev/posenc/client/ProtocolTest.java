package dev.posenc.client;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;

import org.junit.jupiter.api.Test;

/** Request frames and reply headers byte by byte, as docs/protocol.md lays them out. */
class ProtocolTest {
    private static ByteBuffer le(byte[] frame) {
        return ByteBuffer.wrap(frame).order(ByteOrder.LITTLE_ENDIAN);
    }

    @Test
    void anEncodeTableFrameHasTheDocumentedHeaderThenThePositions() {
        byte[] frame = Requests.withTableId(Requests.encodeTable(Positions.of(7L, -1L, 1L << 53), Dtype.BFLOAT16), 42);
        Protocol.setRequestId(frame, 0x0102030405060708L);
        ByteBuffer b = le(frame);
        assertEquals(32 + 3 * 8, frame.length);
        assertEquals(frame.length, b.getInt(0));        // length
        assertEquals(1, b.get(4));                      // version
        assertEquals(5, b.get(5));                      // opcode ENCODE_TABLE
        assertEquals(2, b.get(6));                      // dtype bfloat16
        assertEquals(0, b.get(7));                      // position_kind int64
        assertEquals(0x0102030405060708L, b.getLong(8));
        assertEquals(42, b.getInt(16));                 // table_id
        assertEquals(3, b.getInt(20));                  // count
        assertEquals(0, b.getInt(24));                  // aux_len
        assertEquals(0, b.getInt(28));                  // reserved
        assertEquals(7L, b.getLong(32));
        assertEquals(-1L, b.getLong(40));
        assertEquals(1L << 53, b.getLong(48));
        assertEquals(0x08, frame[8]);                   // little-endian: the low byte first
    }

    @Test
    void anEncodeSpecFrameCarriesTheSpecAsAuxAndFloat64Positions() {
        InlineSpec spec = InlineSpec.rope(new double[] {1.0, 0.25}, 1.5);
        byte[] frame = Requests.encodeSpec(spec, Positions.of(0.5, -0.0), Dtype.FLOAT64);
        ByteBuffer b = le(frame);
        int aux = 32 + 2 * 8;
        assertEquals(32 + aux + 16, b.getInt(0));
        assertEquals(6, b.get(5));
        assertEquals(3, b.get(6));                      // float64
        assertEquals(1, b.get(7));                      // position_kind float64
        assertEquals(0, b.getInt(16));                  // table_id unused
        assertEquals(2, b.getInt(20));
        assertEquals(aux, b.getInt(24));
        assertEquals(2, b.getInt(32));                  // n_freq
        assertEquals(4, b.getInt(36));                  // row_width
        assertEquals(2, b.getInt(40));                  // sin_base
        assertEquals(0, b.getInt(44));                  // cos_base
        assertEquals(2, b.getInt(48));                  // n_cos
        assertEquals(0, b.getInt(52));                  // flags
        assertEquals(1.5, b.getDouble(56));             // amplitude
        assertEquals(1.0, b.getDouble(64));
        assertEquals(0.25, b.getDouble(72));
        assertEquals(0.5, b.getDouble(80));
        assertEquals(Double.doubleToRawLongBits(-0.0), b.getLong(88));
    }

    @Test
    void operationsThatCarryNoPositionsLeaveEveryUnusedFieldZero() {
        byte[] resolve = Requests.resolve("sin128");
        ByteBuffer b = le(resolve);
        assertEquals(32 + 6, b.getInt(0));
        assertEquals(4, b.get(5));
        assertEquals(0, b.get(6) | b.get(7) | b.getInt(16) | b.getInt(20) | b.getInt(28));
        assertEquals(6, b.getInt(24));
        assertEquals("sin128", new String(resolve, 32, 6, StandardCharsets.US_ASCII));
        assertEquals(32, Requests.stats().length);
        assertEquals(2, Requests.stats()[5]);
        assertEquals(3, Requests.listTables()[5]);
        byte[] ping = Requests.ping(new byte[] {9, 8});
        assertEquals(1, ping[5]);
        assertArrayEquals(new byte[] {9, 8}, new byte[] {ping[32], ping[33]});
    }

    @Test
    void aRangeIsWrittenAsConsecutiveInt64Positions() {
        ByteBuffer b = le(Requests.encodeTable(Positions.range(-2, 4), Dtype.FLOAT32));
        assertEquals(4, b.getInt(20));
        for (int i = 0; i < 4; i++) {
            assertEquals(-2 + i, b.getLong(32 + 8 * i));
        }
    }

    @Test
    void aCountTheU32FieldCannotHoldIsRefusedBeforeAnyFrameIsBuilt() {
        InvalidInputException e = assertThrows(InvalidInputException.class,
                () -> Requests.encodeTable(Positions.range(0, 1L << 32), Dtype.FLOAT32));
        assertEquals("positions", e.field());
        InvalidInputException big = assertThrows(InvalidInputException.class,
                () -> Requests.encodeTable(Positions.range(0, 300_000_000L), Dtype.FLOAT32));
        assertEquals("positions", big.field());
    }

    private static ByteBuffer reply(long length, int version, int status, int dtype, long rows, long width, long aux) {
        ByteBuffer b = ByteBuffer.allocate(32).order(ByteOrder.LITTLE_ENDIAN);
        b.putInt(0, (int) length).put(4, (byte) version).put(5, (byte) 5).put(6, (byte) status).put(7, (byte) dtype);
        b.putLong(8, 77).putInt(16, (int) rows).putInt(20, (int) width).putInt(24, (int) aux).putInt(28, 3);
        return b;
    }

    @Test
    void aReplyHeaderIsReadWithItsU32FieldsUnsigned() {
        Protocol.ReplyHeader h = Protocol.ReplyHeader.decode(reply(32 + 2 * 3 * 2, 1, 0, 1, 2, 3, 0));
        assertEquals(44, h.length);
        assertEquals(5, h.opcode);
        assertEquals(1, h.dtype);
        assertEquals(77, h.requestId);
        assertEquals(2, h.rows);
        assertEquals(3, h.width);
        assertEquals(3, h.tableId);
        assertEquals(12, h.payloadLength());
    }

    @Test
    void aReplyHeaderThatDisagreesWithItselfIsAProtocolError() {
        assertThrows(ProtocolException.class, () -> Protocol.ReplyHeader.decode(reply(32, 2, 0, 0, 0, 0, 0)));
        assertThrows(ProtocolException.class, () -> Protocol.ReplyHeader.decode(reply(31, 1, 0, 0, 0, 0, 0)));
        assertThrows(ProtocolException.class, () -> Protocol.ReplyHeader.decode(reply(40, 1, 0, 0, 0, 0, 9)));
        assertThrows(ProtocolException.class, () -> Protocol.ReplyHeader.decode(reply(32 + 8, 1, 0, 0, 1, 1, 0)));
        assertThrows(ProtocolException.class, () -> Protocol.ReplyHeader.decode(reply(32 + 4, 1, 0, 9, 1, 1, 0)));
        // rows * width * itemsize past 2^64: never equal to a u32 length
        assertThrows(ProtocolException.class,
                () -> Protocol.ReplyHeader.decode(reply(0xFFFF_FFFFL, 1, 0, 3, 0xFFFF_FFFFL, 0xFFFF_FFFFL, 0)));
        // an error frame carries no rows: only the aux text must fit
        assertEquals(40, Protocol.ReplyHeader.decode(reply(40, 1, 6, 0, 0, 0, 8)).length);
    }
}
