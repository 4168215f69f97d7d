package dev.posenc.client;

import dev.posenc.TableNames;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;

/** The request frame of each operation (request id and, for ENCODE_TABLE, table id patched in at send). */
final class Requests {
    /** Offset of {@code table_id} in a request frame. */
    private static final int TABLE_ID_OFFSET = 16;
    private static final byte[] NO_AUX = new byte[0];

    private Requests() {
    }

    static byte[] ping(byte[] payload) {
        if (payload == null) {
            throw new InvalidInputException("payload", "must be bytes, got null");
        }
        return Protocol.requestFrame(Opcode.PING, null, 0, payload, null);
    }

    static byte[] stats() {
        return Protocol.requestFrame(Opcode.STATS, null, 0, NO_AUX, null);
    }

    static byte[] listTables() {
        return Protocol.requestFrame(Opcode.LIST_TABLES, null, 0, NO_AUX, null);
    }

    static byte[] resolve(String name) {
        checkName(name);
        return Protocol.requestFrame(Opcode.RESOLVE, null, 0, name.getBytes(StandardCharsets.UTF_8), null);
    }

    /** ENCODE_TABLE with table id 0: {@link #withTableId} sets it once the name is resolved. */
    static byte[] encodeTable(Positions positions, Dtype dtype) {
        return Protocol.requestFrame(Opcode.ENCODE_TABLE, checked(dtype), 0, NO_AUX, checked(positions));
    }

    static byte[] encodeSpec(InlineSpec spec, Positions positions, Dtype dtype) {
        if (spec == null) {
            throw new InvalidInputException("spec", "must be an inline spec, got null");
        }
        return Protocol.requestFrame(Opcode.ENCODE_SPEC, checked(dtype), 0, spec.aux(), checked(positions));
    }

    /** Refuse a name the server would refuse (and the registry could never hold) before sending. */
    static void checkName(String name) {
        if (!TableNames.valid(name)) {
            throw new InvalidInputException("name", TableNames.refusal(name));
        }
    }

    static byte[] withTableId(byte[] frame, int tableId) {
        ByteBuffer.wrap(frame).order(ByteOrder.LITTLE_ENDIAN).putInt(TABLE_ID_OFFSET, tableId);
        return frame;
    }

    private static Dtype checked(Dtype dtype) {
        if (dtype == null) {
            throw new InvalidInputException("dtype", "must be a dtype, got null");
        }
        return dtype;
    }

    private static Positions checked(Positions positions) {
        if (positions == null) {
            throw new InvalidInputException("positions", "must be positions, got null");
        }
        return positions;
    }
}
