package dev.posenc.client;

import java.util.Collections;
import java.util.Map;

/**
 * A published table as RESOLVE (and LIST_TABLES) describe it (docs/protocol.md, "RESOLVE JSON").
 * An entry of LIST_TABLES for a table the server cannot serve has only {@link #name()} and
 * {@link #error()}; its numbers are 0 and its strings null.
 */
public final class TableInfo {
    private final Map<String, Object> json;
    private final int id;

    TableInfo(Map<String, Object> json) {
        this.json = Collections.unmodifiableMap(json);
        this.id = (int) number("id");
    }

    /** The table id ENCODE_TABLE requests carry; it belongs to the server process that gave it. */
    public int id() {
        return id;
    }

    public String name() {
        return (String) json.get("name");
    }

    /** Grows each time the name is republished. */
    public long generation() {
        return number("generation");
    }

    /** "float32" or "float64": how the rows are stored (a computed table: its default dtype). */
    public String dtype() {
        return (String) json.get("dtype");
    }

    /** True for a named computed encoding: no rows stored, each computed on request. */
    public boolean computed() {
        return Boolean.TRUE.equals(json.get("computed"));
    }

    /** stop - start (a computed table: how many integer positions it serves, up to 2^54 + 1). */
    public long rows() {
        return number("rows");
    }

    public int width() {
        return (int) number("width");
    }

    /** The first position. */
    public long start() {
        return number("start");
    }

    /** One past the last position. */
    public long stop() {
        return number("stop");
    }

    /** 16 lower-case hex digits of the spec's SHA-256. */
    public String specHash() {
        return (String) json.get("spec_hash");
    }

    /** When the generation was published, ns since the Unix epoch. */
    public long createdNs() {
        return number("created_ns");
    }

    public long writerPid() {
        return number("writer_pid");
    }

    /** The table spec as the store holds it (encoding, start, stop, dtype, seq_len, computed). */
    @SuppressWarnings("unchecked")
    public Map<String, Object> spec() {
        Object spec = json.get("spec");
        return spec instanceof Map ? Collections.unmodifiableMap((Map<String, Object>) spec) : null;
    }

    /** Why LIST_TABLES cannot serve this table, or null. */
    public String error() {
        return (String) json.get("error");
    }

    /** The whole JSON object (keys a later server adds included). */
    public Map<String, Object> json() {
        return json;
    }

    @Override
    public String toString() {
        return "TableInfo" + json;
    }

    private long number(String key) {
        Object v = json.get(key);
        return v instanceof Number ? ((Number) v).longValue() : 0L;
    }
}
