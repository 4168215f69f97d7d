package dev.posenc.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.math.BigInteger;
import java.util.List;
import java.util.Map;

import org.junit.jupiter.api.Test;

/** The JSON of the server's replies, big integers exact. */
class JsonTest {
    @Test
    @SuppressWarnings("unchecked")
    void objectsArraysAndScalars() {
        Map<String, Object> v = (Map<String, Object>) Json.parse(
                " {\"a\": [1, -2.5e3, true, false, null], \"s\": \"q\\\"\\u00e9\\n\", \"o\": {}} ");
        List<Object> a = (List<Object>) v.get("a");
        assertEquals(1L, a.get(0));
        assertEquals(-2500.0, a.get(1));
        assertEquals(true, a.get(2));
        assertNull(a.get(4));
        assertEquals("q\"\u00e9\n", v.get("s"));
        assertEquals(Map.of(), v.get("o"));
        assertEquals(List.of("a", "s", "o"), List.copyOf(v.keySet()));
    }

    @Test
    void integersAbove2To53StayExact() {
        assertEquals(9007199254740993L, Json.parse("9007199254740993"));
        assertEquals(-9223372036854775808L, Json.parse("-9223372036854775808"));
        assertEquals(new BigInteger("18446744073709551615"), Json.parse("18446744073709551615"));
    }

    @Test
    void notJsonIsAProtocolError() {
        for (String bad : new String[] {"", "{", "[1,]", "{\"a\" 1}", "tru", "\"open", "1 2", "{1: 2}"}) {
            assertThrows(ProtocolException.class, () -> Json.parse(bad), bad);
        }
    }

    @Test
    void quoteEscapesWhatJsonRequires() {
        assertEquals("\"a\\\"b\\\\c\\n\\u0001\"", Json.quote("a\"b\\c\n\u0001"));
        assertEquals("a\"b\\c\n\u0001", Json.parse(Json.quote("a\"b\\c\n\u0001")));
    }
}
