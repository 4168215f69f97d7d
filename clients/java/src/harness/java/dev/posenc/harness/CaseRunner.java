package dev.posenc.harness;

import dev.posenc.PosencException;
import dev.posenc.client.Dtype;
import dev.posenc.client.InlineSpec;
import dev.posenc.client.InvalidInputException;
import dev.posenc.client.Json;
import dev.posenc.client.PosencClient;
import dev.posenc.client.Positions;
import dev.posenc.client.Rows;
import dev.posenc.client.ServerException;
import dev.posenc.client.TableInfo;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * {@code run-cases CASES_JSON ADDRESS SHM_DIR}: every case of tests/clients/cases.py's list, in
 * order, through one PosencClient; one line per case, {@code {"id", "ok", "detail"}}
 * (tests/clients/README.md).
 */
public final class CaseRunner {
    private CaseRunner() {
    }

    @SuppressWarnings("unchecked")
    public static void main(String[] args) throws Exception {
        Map<String, Object> file = (Map<String, Object>) Json.parse(
                new String(Files.readAllBytes(Paths.get(args[0])), StandardCharsets.UTF_8));
        try (PosencClient client = PosencClient.connect(args[1])) {
            for (Object item : (List<Object>) file.get("cases")) {
                Map<String, Object> c = (Map<String, Object>) item;
                String problem;
                try {
                    problem = judge((Map<String, Object>) c.get("expect"), outcome(client, c));
                } catch (RuntimeException e) {
                    problem = "the runner failed: " + e;
                }
                new JsonLine().put("id", c.get("id")).put("ok", problem == null).put("detail", problem == null ? "" : problem)
                        .print();
            }
        }
    }

    /** What the client answered: a value, or the PosencException it threw. */
    private static Object outcome(PosencClient client, Map<String, Object> c) {
        try {
            switch ((String) c.get("op")) {
                case "ping": return client.ping(Hex.bytes((String) c.get("payload_hex")));
                case "stats": return client.stats();
                case "list_tables": return client.listTables();
                case "resolve": return client.resolve((String) c.get("table"));
                case "encode_table":
                    Dtype dtype = Dtype.ofName((String) c.get("dtype"));
                    if (c.containsKey("table")) {
                        return client.encode((String) c.get("table"), positions(c), dtype);
                    }
                    return client.encodeById((int) number(c.get("table_id")), positions(c), dtype);
                case "encode_spec":
                    Dtype specDtype = Dtype.ofName((String) c.get("dtype"));
                    return client.encodeSpec(spec(asMap(c.get("spec"))), positions(c), specDtype);
                default: throw new IllegalArgumentException("unknown op " + c.get("op"));
            }
        } catch (PosencException e) {
            return e;
        }
    }

    /** Why {@code outcome} is not what {@code expect} says, or null. */
    @SuppressWarnings("unchecked")
    private static String judge(Map<String, Object> expect, Object outcome) {
        if (expect.containsKey("refused_locally")) {
            String field = (String) asMap(expect.get("refused_locally")).get("field");
            return outcome instanceof InvalidInputException && ((InvalidInputException) outcome).field().equals(field)
                    ? null : "expected a local refusal naming " + field + ", got " + describe(outcome);
        }
        if (expect.containsKey("error")) {
            Map<String, Object> want = asMap(expect.get("error"));
            if (!(outcome instanceof ServerException)) {
                return "expected " + want.get("name") + ", got " + describe(outcome);
            }
            ServerException e = (ServerException) outcome;
            boolean same = e.statusCode() == number(want.get("status")) && e.statusName().equals(want.get("name"))
                    && e.field().equals(want.get("field")) && e.detail().contains((String) want.get("message_contains"));
            return same ? null : "expected " + want + ", got " + describe(outcome);
        }
        if (outcome instanceof PosencException) {
            return "unexpected " + describe(outcome);
        }
        if (expect.containsKey("data_hex")) {
            return rowsProblem(expect, (Rows) outcome);
        }
        if (expect.containsKey("payload_hex")) {
            String got = Hex.of((byte[]) outcome);
            return got.equals(expect.get("payload_hex")) ? null : "payload " + got;
        }
        if (expect.containsKey("table")) {
            return tableProblem(asMap(expect.get("table")), (TableInfo) outcome);
        }
        if (expect.containsKey("tables")) {
            return listingProblem((List<Object>) expect.get("tables"), (List<TableInfo>) outcome);
        }
        return subsetProblem("", expect.get("json_subset"), outcome);
    }

    private static String rowsProblem(Map<String, Object> expect, Rows rows) {
        String values = rows.dtype() == Dtype.FLOAT64 ? Hex.float64s(rows.toDoubleArray())
                : Hex.float32s(rows.toFloatArray());
        String data = Hex.of(rows.toByteArray());
        if (rows.rows() != number(expect.get("rows")) || rows.width() != number(expect.get("width"))
                || !rows.dtype().wireName().equals(expect.get("dtype"))) {
            return "got " + rows.rows() + "x" + rows.width() + " " + rows.dtype().wireName() + ", expected "
                    + expect.get("rows") + "x" + expect.get("width") + " " + expect.get("dtype");
        }
        if (!data.equals(expect.get("data_hex"))) {
            return "row bytes differ: " + abbreviate(data) + " vs " + abbreviate((String) expect.get("data_hex"));
        }
        return values.equals(expect.get("values_hex")) ? null : "decoded values differ: " + abbreviate(values);
    }

    private static String tableProblem(Map<String, Object> want, TableInfo t) {
        Map<String, Object> got = new HashMap<>();
        got.put("name", t.name());
        got.put("dtype", t.dtype());
        got.put("computed", t.computed());
        got.put("rows", t.rows());
        got.put("width", (long) t.width());
        got.put("start", t.start());
        got.put("stop", t.stop());
        got.put("spec_hash", t.specHash());
        for (Map.Entry<String, Object> e : want.entrySet()) {
            if (!same(e.getValue(), got.get(e.getKey()))) {
                return e.getKey() + ": got " + got.get(e.getKey()) + ", expected " + e.getValue();
            }
        }
        return t.id() >= 1 && t.generation() >= 1 ? null : "id " + t.id() + ", generation " + t.generation();
    }

    private static String listingProblem(List<Object> want, List<TableInfo> got) {
        if (want.size() != got.size()) {
            return want.size() + " tables expected, got " + got;
        }
        for (int i = 0; i < want.size(); i++) {
            Map<String, Object> w = asMap(want.get(i));
            TableInfo t = got.get(i);
            boolean ok = w.get("name").equals(t.name()) && (w.containsKey("error_contains")
                    ? t.error() != null && t.error().contains((String) w.get("error_contains"))
                    : t.error() == null && w.get("computed").equals(t.computed()));
            if (!ok) {
                return "entry " + i + ": expected " + w + ", got " + t;
            }
        }
        return null;
    }

    /** Every key of {@code want} in {@code got} with the same value (nested objects: their keys). */
    private static String subsetProblem(String path, Object want, Object got) {
        if (want instanceof Map) {
            if (!(got instanceof Map)) {
                return path + ": expected an object, got " + got;
            }
            for (Map.Entry<String, Object> e : asMap(want).entrySet()) {
                String problem = subsetProblem(path + "/" + e.getKey(), e.getValue(), asMap(got).get(e.getKey()));
                if (problem != null) {
                    return problem;
                }
            }
            return null;
        }
        return same(want, got) ? null : path + ": got " + got + ", expected " + want;
    }

    private static boolean same(Object want, Object got) {
        if (want instanceof Number && got instanceof Number) {
            return ((Number) want).longValue() == ((Number) got).longValue()
                    && ((Number) want).doubleValue() == ((Number) got).doubleValue();
        }
        return want == null ? got == null : want.equals(got);
    }

    private static Positions positions(Map<String, Object> c) {
        if (c.containsKey("positions_range")) {
            Map<String, Object> r = asMap(c.get("positions_range"));
            return Positions.range(number(r.get("start")), number(r.get("count")));
        }
        if ("float64".equals(c.get("position_kind"))) {
            List<?> bits = (List<?>) c.get("positions_bits");
            return Positions.of(bits.stream().mapToDouble(b -> Hex.float64((String) b)).toArray());
        }
        return Positions.of(((List<?>) c.get("positions")).stream().mapToLong(CaseRunner::number).toArray());
    }

    /** The case's spec object, field by field (u32 fields as ints read unsigned by the builder). */
    private static InlineSpec spec(Map<String, Object> s) {
        InlineSpec.Builder b = InlineSpec.builder()
                .nFreq((int) number(s.get("n_freq")))
                .rowWidth((int) number(s.get("row_width")))
                .sinBase((int) number(s.get("sin_base")))
                .cosBase((int) number(s.get("cos_base")))
                .nCos((int) number(s.get("n_cos")))
                .flags((int) number(s.get("flags")))
                .amplitude(Hex.float64((String) s.get("amplitude_bits")))
                .freqs(float64s(s.get("freqs_bits")));
        if (s.containsKey("scale_bits")) {
            b.scale(float64s(s.get("scale_bits")));
        }
        return b.build();
    }

    private static double[] float64s(Object bits) {
        return ((List<?>) bits).stream().mapToDouble(b -> Hex.float64((String) b)).toArray();
    }

    private static long number(Object value) {
        return ((Number) value).longValue();
    }

    @SuppressWarnings("unchecked")
    private static Map<String, Object> asMap(Object value) {
        return (Map<String, Object>) value;
    }

    private static String describe(Object outcome) {
        if (outcome instanceof ServerException) {
            ServerException e = (ServerException) outcome;
            return e.statusName() + " (" + e.statusCode() + ") " + e.getMessage();
        }
        if (outcome instanceof PosencException) {
            return outcome.getClass().getSimpleName() + " " + ((PosencException) outcome).getMessage();
        }
        return outcome instanceof byte[] ? Arrays.toString((byte[]) outcome) : String.valueOf(outcome);
    }

    private static String abbreviate(String hex) {
        return hex.length() > 80 ? hex.substring(0, 80) + "..." : hex;
    }
}
