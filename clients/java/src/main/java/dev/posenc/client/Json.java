package dev.posenc.client;

import java.math.BigInteger;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The JSON of STATS, LIST_TABLES and RESOLVE replies (RFC 8259), without a dependency: objects
 * become {@code LinkedHashMap<String, Object>} (key order kept), arrays {@code ArrayList<Object>},
 * integers {@code Long} ({@code BigInteger} beyond 64 bits), other numbers {@code Double},
 * strings, booleans and null as themselves. A generation or a created_ns above 2^53 stays exact.
 */
public final class Json {
    private final String text;
    private int at;

    private Json(String text) {
        this.text = text;
    }

    /** The value of a JSON text; a {@link ProtocolException} when it is not one. */
    public static Object parse(String text) {
        Json p = new Json(text);
        p.skipSpace();
        Object value = p.value();
        p.skipSpace();
        if (p.at != text.length()) {
            throw p.error("trailing characters");
        }
        return value;
    }

    /** {@code s} as a JSON string literal (quotes and escapes). */
    public static String quote(String s) {
        StringBuilder b = new StringBuilder(s.length() + 2).append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"': b.append("\\\""); break;
                case '\\': b.append("\\\\"); break;
                case '\n': b.append("\\n"); break;
                case '\r': b.append("\\r"); break;
                case '\t': b.append("\\t"); break;
                default:
                    if (c < 0x20) {
                        b.append(String.format("\\u%04x", (int) c));
                    } else {
                        b.append(c);
                    }
            }
        }
        return b.append('"').toString();
    }

    private Object value() {
        if (at >= text.length()) {
            throw error("unexpected end");
        }
        char c = text.charAt(at);
        switch (c) {
            case '{': return object();
            case '[': return array();
            case '"': return string();
            case 't': return literal("true", Boolean.TRUE);
            case 'f': return literal("false", Boolean.FALSE);
            case 'n': return literal("null", null);
            default:
                if (c == '-' || (c >= '0' && c <= '9')) {
                    return number();
                }
                throw error("unexpected character '" + c + "'");
        }
    }

    private Map<String, Object> object() {
        Map<String, Object> out = new LinkedHashMap<>();
        at++;
        skipSpace();
        if (peek('}')) {
            at++;
            return out;
        }
        while (true) {
            skipSpace();
            if (!peek('"')) {
                throw error("expected a key");
            }
            String key = string();
            skipSpace();
            expect(':');
            skipSpace();
            out.put(key, value());
            skipSpace();
            if (peek(',')) {
                at++;
                continue;
            }
            expect('}');
            return out;
        }
    }

    private List<Object> array() {
        List<Object> out = new ArrayList<>();
        at++;
        skipSpace();
        if (peek(']')) {
            at++;
            return out;
        }
        while (true) {
            skipSpace();
            out.add(value());
            skipSpace();
            if (peek(',')) {
                at++;
                continue;
            }
            expect(']');
            return out;
        }
    }

    private String string() {
        at++;
        StringBuilder b = new StringBuilder();
        while (at < text.length()) {
            char c = text.charAt(at++);
            if (c == '"') {
                return b.toString();
            }
            if (c != '\\') {
                b.append(c);
                continue;
            }
            if (at >= text.length()) {
                break;
            }
            char e = text.charAt(at++);
            switch (e) {
                case '"': case '\\': case '/': b.append(e); break;
                case 'b': b.append('\b'); break;
                case 'f': b.append('\f'); break;
                case 'n': b.append('\n'); break;
                case 'r': b.append('\r'); break;
                case 't': b.append('\t'); break;
                case 'u':
                    if (at + 4 > text.length()) {
                        throw error("short \\u escape");
                    }
                    b.append((char) Integer.parseInt(text.substring(at, at + 4), 16));
                    at += 4;
                    break;
                default:
                    throw error("bad escape \\" + e);
            }
        }
        throw error("unterminated string");
    }

    private Object number() {
        int start = at;
        boolean integral = true;
        while (at < text.length()) {
            char c = text.charAt(at);
            if (c == '.' || c == 'e' || c == 'E') {
                integral = false;
            } else if (!(c == '-' || c == '+' || (c >= '0' && c <= '9'))) {
                break;
            }
            at++;
        }
        String digits = text.substring(start, at);
        try {
            if (!integral) {
                return Double.parseDouble(digits);
            }
            BigInteger big = new BigInteger(digits);
            return big.bitLength() < 64 ? (Object) big.longValue() : big;
        } catch (NumberFormatException bad) {
            throw error("bad number '" + digits + "'");
        }
    }

    private Object literal(String word, Object value) {
        if (!text.startsWith(word, at)) {
            throw error("unexpected word");
        }
        at += word.length();
        return value;
    }

    private boolean peek(char c) {
        return at < text.length() && text.charAt(at) == c;
    }

    private void expect(char c) {
        if (!peek(c)) {
            throw error("expected '" + c + "'");
        }
        at++;
    }

    private void skipSpace() {
        while (at < text.length() && " \t\r\n".indexOf(text.charAt(at)) >= 0) {
            at++;
        }
    }

    private ProtocolException error(String what) {
        return new ProtocolException("bad JSON at character " + at + ": " + what);
    }
}
