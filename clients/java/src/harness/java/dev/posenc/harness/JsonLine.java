package dev.posenc.harness;

import dev.posenc.client.Json;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/** One JSON object printed as one stdout line (the runners' only output there). */
final class JsonLine {
    private final Map<String, Object> fields = new LinkedHashMap<>();

    JsonLine put(String key, Object value) {
        fields.put(key, value);
        return this;
    }

    Object get(String key) {
        return fields.get(key);
    }

    void print() {
        String line = render(fields);
        synchronized (System.out) {
            System.out.println(line);
            System.out.flush();
        }
    }

    static void event(String name) {
        new JsonLine().put("event", name).print();
    }

    private static String render(Object value) {
        if (value == null) {
            return "null";
        }
        if (value instanceof String) {
            return Json.quote((String) value);
        }
        if (value instanceof Number || value instanceof Boolean) {
            return value.toString();
        }
        StringBuilder b = new StringBuilder();
        if (value instanceof Map) {
            b.append('{');
            for (Map.Entry<?, ?> e : ((Map<?, ?>) value).entrySet()) {
                b.append(b.length() > 1 ? "," : "").append(Json.quote(e.getKey().toString())).append(':')
                        .append(render(e.getValue()));
            }
            return b.append('}').toString();
        }
        if (value instanceof List) {
            b.append('[');
            for (Object item : (List<?>) value) {
                b.append(b.length() > 1 ? "," : "").append(render(item));
            }
            return b.append(']').toString();
        }
        return Json.quote(value.toString());
    }
}
