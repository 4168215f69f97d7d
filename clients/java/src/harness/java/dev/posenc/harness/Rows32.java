package dev.posenc.harness;

import dev.posenc.client.Rows;
import dev.posenc.shm.ShmTable;

import java.nio.FloatBuffer;

/** Rows from the server checked against a float32 table's rows read in place through shared memory. */
final class Rows32 {
    private Rows32() {
    }

    /** How many rows were checked (all of them); an AssertionError naming the first that differs. */
    static int compare(Rows rows, ShmTable table, long[] positions) {
        ScenarioRunner.check(rows.rows() == positions.length && rows.width() == table.width(),
                "got " + rows.rows() + "x" + rows.width() + " rows for " + positions.length + " positions");
        for (int r = 0; r < positions.length; r++) {
            FloatBuffer want = table.floatRow(positions[r]);
            for (int c = 0; c < rows.width(); c++) {
                ScenarioRunner.check(Float.floatToRawIntBits(rows.getFloat(r, c))
                        == Float.floatToRawIntBits(want.get(c)), "row of position " + positions[r] + " differs at column " + c);
            }
        }
        return positions.length;
    }
}
