package dev.posenc.harness;

import dev.posenc.PosencException;
import dev.posenc.client.Json;
import dev.posenc.shm.ShmDirectory;
import dev.posenc.shm.ShmTable;

import java.io.BufferedReader;
import java.nio.ByteBuffer;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;

/**
 * {@code shm-read}: for each stdin line {@code {"table", "positions", "verify"}}, attach the table
 * and print its header facts and the bytes of the rows at the positions, or the refusal's field
 * and words. No result line.
 */
final class ShmRead implements ScenarioRunner.Scenario {
    @Override
    @SuppressWarnings("unchecked")
    public JsonLine run(String address, Path shmDir, BufferedReader stdin) throws Exception {
        ShmDirectory dir = new ShmDirectory(shmDir);
        for (String line = stdin.readLine(); line != null; line = stdin.readLine()) {
            Map<String, Object> ask = (Map<String, Object>) Json.parse(line);
            String name = (String) ask.get("table");
            JsonLine reply = new JsonLine().put("table", name);
            try {
                ShmTable t = dir.attach(name, !Boolean.FALSE.equals(ask.get("verify")));
                StringBuilder hex = new StringBuilder();
                for (Object p : (List<Object>) ask.get("positions")) {
                    ByteBuffer row = t.row(((Number) p).longValue());
                    byte[] bytes = new byte[row.remaining()];
                    row.get(bytes);
                    hex.append(Hex.of(bytes));
                }
                reply.put("ok", true).put("generation", t.generation()).put("dtype", t.dtype()).put("start", t.start())
                        .put("rows", t.rows()).put("width", t.width()).put("spec_hash", t.specHash())
                        .put("checksum", t.checksumAlgorithm()).put("data_hex", hex.toString());
            } catch (PosencException e) {
                reply.put("ok", false).put("field", e.field()).put("error", e.getMessage());
            }
            reply.print();
        }
        return null;
    }
}
