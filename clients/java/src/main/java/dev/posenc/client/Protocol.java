package dev.posenc.client;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;

/**
 * The wire format of docs/protocol.md: constants, request frames and reply headers. Every
 * integer is little-endian; u32 fields are carried in Java {@code long}s (or {@code int}s read
 * unsigned) so that no value above 2^31 turns negative. native/include/posenc_proto.h is the C
 * form of the same contract, service/posenc/client/protocol.py the Python one.
 */
public final class Protocol {
    public static final int VERSION = 1;
    /** Request and reply headers are both 32 bytes. */
    public static final int HEADER_SIZE = 32;
    public static final int DEFAULT_PORT = 8001;
    /** The fixed part of an ENCODE_SPEC aux block. */
    public static final int SPEC_PREFIX_SIZE = 32;
    /** The largest {@code length} a frame can state (a u32). */
    public static final long MAX_FRAME_LENGTH = 0xFFFF_FFFFL;
    /** The most positions one request can carry (its {@code count} is a u32). */
    public static final long MAX_COUNT = 0xFFFF_FFFFL;
    /** Position kinds: how the request's positions are written. */
    public static final int POSITIONS_INT64 = 0;
    public static final int POSITIONS_FLOAT64 = 1;
    /** Offset of {@code request_id} in a request frame: patched when the frame is sent. */
    static final int REQUEST_ID_OFFSET = 8;

    private Protocol() {
    }

    /**
     * A whole request frame: the header (request id 0 until {@link #setRequestId}), then
     * {@code aux}, then the positions.
     */
    public static byte[] requestFrame(Opcode opcode, Dtype dtype, int tableId, byte[] aux, Positions positions) {
        long count = positions == null ? 0 : positions.count();
        if (count > MAX_COUNT) {
            throw new InvalidInputException("positions", count + " positions: a request's count is a u32 (at most "
                    + MAX_COUNT + "); split them");
        }
        long length = (long) HEADER_SIZE + aux.length + 8L * count;
        if (length > MAX_FRAME_LENGTH || length > Integer.MAX_VALUE - 8) {
            throw new InvalidInputException("positions", "a frame of " + length + " bytes (" + count
                    + " positions) is more than one request can carry; split them");
        }
        ByteBuffer b = ByteBuffer.allocate((int) length).order(ByteOrder.LITTLE_ENDIAN);
        b.putInt((int) length);
        b.put((byte) VERSION);
        b.put((byte) opcode.code());
        b.put((byte) (dtype == null ? 0 : dtype.code()));
        b.put((byte) (positions == null ? 0 : positions.kind()));
        b.putLong(0L);
        b.putInt(tableId);
        b.putInt((int) count);
        b.putInt(aux.length);
        b.putInt(0);
        b.put(aux);
        if (positions != null) {
            positions.writeTo(b);
        }
        return b.array();
    }

    /** Store {@code requestId} in a frame made by {@link #requestFrame}. */
    public static void setRequestId(byte[] frame, long requestId) {
        ByteBuffer.wrap(frame).order(ByteOrder.LITTLE_ENDIAN).putLong(REQUEST_ID_OFFSET, requestId);
    }

    /**
     * A decoded reply header (docs/protocol.md, "Reply frame"); u32 fields as non-negative longs.
     */
    public static final class ReplyHeader {
        public final long length;
        public final int version;
        public final int opcode;
        public final int status;
        public final int dtype;
        public final long requestId;
        public final long rows;
        public final long width;
        public final long auxLen;
        public final long tableId;

        ReplyHeader(ByteBuffer b) {
            ByteBuffer h = b.duplicate().order(ByteOrder.LITTLE_ENDIAN);
            int at = h.position();
            length = Integer.toUnsignedLong(h.getInt(at));
            version = Byte.toUnsignedInt(h.get(at + 4));
            opcode = Byte.toUnsignedInt(h.get(at + 5));
            status = Byte.toUnsignedInt(h.get(at + 6));
            dtype = Byte.toUnsignedInt(h.get(at + 7));
            requestId = h.getLong(at + 8);
            rows = Integer.toUnsignedLong(h.getInt(at + 16));
            width = Integer.toUnsignedLong(h.getInt(at + 20));
            auxLen = Integer.toUnsignedLong(h.getInt(at + 24));
            tableId = Integer.toUnsignedLong(h.getInt(at + 28));
        }

        /**
         * Decode and check the 32 bytes at {@code b}'s position: version 1, a length that holds
         * the aux block and, for a success, exactly {@code rows * width} values of its dtype.
         */
        public static ReplyHeader decode(ByteBuffer b) {
            ReplyHeader h = new ReplyHeader(b);
            if (h.version != VERSION || h.length < HEADER_SIZE || h.auxLen > h.length - HEADER_SIZE) {
                throw new ProtocolException("bad reply header (version " + h.version + ", length " + h.length
                        + ", aux_len " + h.auxLen + ")");
            }
            if (h.status == Status.OK.code()) {
                Dtype d = Dtype.ofCode(h.dtype);
                long itemsize = d == null ? 0 : d.itemsize();
                long body;
                try {
                    body = Math.multiplyExact(Math.multiplyExact(h.rows, h.width), itemsize);
                } catch (ArithmeticException overflow) {
                    body = Long.MAX_VALUE;
                }
                if (body != h.length - HEADER_SIZE - h.auxLen) {
                    throw new ProtocolException("reply length " + h.length + " does not match " + h.rows + "x"
                            + h.width + " rows of dtype " + h.dtype);
                }
            }
            if (h.length - HEADER_SIZE > Integer.MAX_VALUE - 8) {
                throw new ProtocolException("a reply of " + h.length + " bytes is more than one Java array holds");
            }
            return h;
        }

        /** Bytes after the header: the aux block and the rows. */
        public int payloadLength() {
            return (int) (length - HEADER_SIZE);
        }
    }
}
