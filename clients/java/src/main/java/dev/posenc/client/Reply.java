package dev.posenc.client;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.List;
import java.util.Map;

/** One successful reply frame: its header and payload (aux block, then rows). */
final class Reply {
    final Protocol.ReplyHeader header;
    private final byte[] payload;

    Reply(Protocol.ReplyHeader header, byte[] payload) {
        this.header = header;
        this.payload = payload;
    }

    byte[] aux() {
        return Arrays.copyOf(payload, (int) header.auxLen);
    }

    String auxText() {
        return new String(payload, 0, (int) header.auxLen, StandardCharsets.UTF_8);
    }

    Rows rows() {
        ByteBuffer body = ByteBuffer.wrap(payload, (int) header.auxLen, payload.length - (int) header.auxLen);
        return new Rows(Dtype.ofCode(header.dtype), (int) header.rows, (int) header.width, body);
    }

    @SuppressWarnings("unchecked")
    Map<String, Object> jsonObject() {
        Object value = Json.parse(auxText());
        if (!(value instanceof Map)) {
            throw new ProtocolException("expected a JSON object, got " + auxText());
        }
        return (Map<String, Object>) value;
    }

    @SuppressWarnings("unchecked")
    List<Object> jsonArray() {
        Object value = Json.parse(auxText());
        if (!(value instanceof List)) {
            throw new ProtocolException("expected a JSON array, got " + auxText());
        }
        return (List<Object>) value;
    }

    /** RESOLVE: the JSON, with the header's table id as "id" when the JSON lacks it. */
    TableInfo tableInfo() {
        Map<String, Object> json = jsonObject();
        json.putIfAbsent("id", header.tableId);
        return new TableInfo(json);
    }
}
