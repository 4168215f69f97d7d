package dev.posenc.harness;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.nio.file.Paths;

/**
 * {@code run-scenario NAME ADDRESS SHM_DIR} (tests/clients/README.md, "The scenarios"): JSON
 * lines on stdout, the last one the result; exit status 0 when it says ok.
 */
public final class ScenarioRunner {
    private ScenarioRunner() {
    }

    /** One scenario: run it, return its result line (with "ok"). */
    interface Scenario {
        JsonLine run(String address, Path shmDir, BufferedReader stdin) throws Exception;
    }

    public static void main(String[] args) throws Exception {
        Scenario scenario;
        switch (args[0]) {
            case "concurrency": scenario = new Concurrency(); break;
            case "reconnect": scenario = new Reconnect(); break;
            case "drain": scenario = new Drain(); break;
            case "shm-replace": scenario = new ShmReplace(); break;
            case "shm-read": scenario = new ShmRead(); break;
            default:
                new JsonLine().put("ok", false).put("detail", "unknown scenario " + args[0]).print();
                System.exit(2);
                return;
        }
        BufferedReader stdin = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        JsonLine result;
        boolean ok;
        try {
            result = scenario.run(args[1], Paths.get(args[2]), stdin);
            ok = result == null || Boolean.TRUE.equals(result.get("ok"));
        } catch (Exception | AssertionError e) {
            e.printStackTrace();
            result = new JsonLine().put("ok", false).put("detail", e.toString());
            ok = false;
        }
        if (result != null) {
            result.print();
        }
        System.exit(ok ? 0 : 1);
    }

    /** A failed check: the scenario's result says why. */
    static void check(boolean condition, String what) {
        if (!condition) {
            throw new AssertionError(what);
        }
    }
}
