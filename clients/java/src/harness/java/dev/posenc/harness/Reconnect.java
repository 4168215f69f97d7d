package dev.posenc.harness;

import dev.posenc.client.Dtype;
import dev.posenc.client.PosencClient;
import dev.posenc.client.Positions;
import dev.posenc.shm.ShmDirectory;
import dev.posenc.shm.ShmTable;

import java.io.BufferedReader;
import java.nio.file.Path;

/**
 * {@code reconnect}: a call; 1.5 s idle, in which the server closes the pooled connection
 * (IDLE_TIMEOUT); a call; ready; (pytest restarts the server, other tables taking the first ids);
 * calls of sin128, which must succeed at once with the id resolved again.
 */
final class Reconnect implements ScenarioRunner.Scenario {
    private static final long[] POSITIONS = {0, 1, 17, 4095};
    private static final int CALLS_AFTER_RESTART = 3;

    @Override
    public JsonLine run(String address, Path shmDir, BufferedReader stdin) throws Exception {
        ShmTable sin128 = new ShmDirectory(shmDir).attach("sin128");
        try (PosencClient client = PosencClient.builder(address).poolSize(1).build()) {
            call(client, sin128);
            Thread.sleep(1500);
            call(client, sin128);
            JsonLine.event("ready");
            ScenarioRunner.check(stdin.readLine() != null, "stdin ended before the server was restarted");
            for (int i = 0; i < CALLS_AFTER_RESTART; i++) {
                call(client, sin128);
            }
        }
        return new JsonLine().put("ok", true).put("calls_after_restart", CALLS_AFTER_RESTART);
    }

    private static void call(PosencClient client, ShmTable sin128) {
        Rows32.compare(client.encode("sin128", Positions.of(POSITIONS), Dtype.FLOAT32), sin128, POSITIONS);
    }
}
