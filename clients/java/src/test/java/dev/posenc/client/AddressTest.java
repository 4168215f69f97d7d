package dev.posenc.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import org.junit.jupiter.api.Test;

/** Addresses spelled as the Python client spells them. */
class AddressTest {
    @Test
    void tcpAndUnixSpellings() {
        assertEquals("127.0.0.1:8001", Address.parse("127.0.0.1:8001").toString());
        assertEquals("localhost:9", Address.parse("tcp://localhost:9").toString());
        assertEquals("[::1]:8001", Address.parse("[::1]:8001").toString());
        assertEquals("unix:/run/posenc.sock", Address.parse("unix:/run/posenc.sock").toString());
        assertEquals("unix:/run/posenc.sock", Address.parse("unix:///run/posenc.sock").toString());
        assertEquals("unix:./x.sock", Address.parse("./x.sock").toString());
    }

    @Test
    void aBadAddressNamesTheField() {
        for (String bad : new String[] {"", "localhost", ":8001", "host:port", "host:0", "host:65536"}) {
            assertEquals("address", assertThrows(InvalidInputException.class, () -> Address.parse(bad)).field(), bad);
        }
    }
}
