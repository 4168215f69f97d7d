package dev.posenc;

/**
 * The rule every posenc table name follows (docs/shm-format.md, "Files"; RESOLVE in
 * docs/protocol.md): 1 to 64 characters of {@code [A-Za-z0-9_.-]}, no {@code ..}, not {@code .}
 * alone, so that a name can never reach outside the shm directory.
 */
public final class TableNames {
    public static final int MAX_LENGTH = 64;

    private TableNames() {
    }

    public static boolean valid(String name) {
        if (name == null || name.isEmpty() || name.length() > MAX_LENGTH || name.contains("..") || name.equals(".")) {
            return false;
        }
        for (int i = 0; i < name.length(); i++) {
            char c = name.charAt(i);
            if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.'
                    || c == '-')) {
                return false;
            }
        }
        return true;
    }

    /** Why {@code name} is refused, in the words the readers use. */
    public static String refusal(String name) {
        return "'" + name + "' is not a table name: must be 1..64 of [A-Za-z0-9_.-], no '/' or '..'";
    }
}
