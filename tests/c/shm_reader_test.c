/*
 * Exercises native/include/posenc_shm.h against tables published by Python
 * (tests/test_shm_c_reader.py compiles and runs it).
 *
 *   shm_reader_test name DIR NAME VERIFY POSITION...   attach by name through the registry
 *   shm_reader_test path FILE VERIFY POSITION...       attach one segment file
 *
 * Prints "ok generation=G start=S stop=E width=W dtype=D hash=H name=N checksum=C", then one line
 * per position: "row P" and the row's values as C99 hex floats (exact), or "row P none"
 * outside the table. On refusal prints "error CODE MESSAGE" and exits 3.
 */
#include "posenc_shm.h"

#include <stdlib.h>

static int crc_self_test(void)
{
    posenc_shm_crc_tables crc;
    posenc_shm_crc_init(&crc);
    /* The CRC-32 check value, and chaining across an odd split (as zlib.crc32(b, crc32(a))). */
    uint32_t whole = posenc_shm_crc32(&crc, 0, "123456789", 9);
    uint32_t split = posenc_shm_crc32(&crc, posenc_shm_crc32(&crc, 0, "123", 3), "456789", 6);
    if (whole != 0xCBF43926u || split != whole) {
        printf("error crc32 self-test: %08x %08x\n", whole, split);
        return 0;
    }
    /* CRC-32C: the check value, RFC 3720's 32 zero bytes, and chaining across a split. */
    static const uint8_t zeros[32];
    uint32_t c_whole = posenc_shm_crc32c(0, "123456789", 9);
    uint32_t c_split = posenc_shm_crc32c(posenc_shm_crc32c(0, "1234", 4), "56789", 5);
    if (c_whole != 0xE3069283u || c_split != c_whole || posenc_shm_crc32c(0, zeros, 32) != 0x8A9136AAu) {
        printf("error crc32c self-test: %08x %08x\n", c_whole, c_split);
        return 0;
    }
    return 1;
}

/* SHA-256 (the spec hash): FIPS 180-4's vectors, "" and lengths across the one/two padding-block
 * boundary (55, 56, 64 bytes). */
static int sha256_self_test(void)
{
    static const struct { const char *msg; size_t n; const char *hex; } vectors[] = {
        {"", 0, "e3b0c44298fc1c14"},
        {"abc", 3, "ba7816bf8f01cfea"},
        {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", 56, "248d6a61d20638b8"},
        {"0123456789012345678901234567890123456789012345678901234", 55, "f34d5a0f80c0cbf8"},
        {"0123456789012345678901234567890123456789012345678901234567890123", 64, "9674d9e078535b7c"},
    };
    for (size_t i = 0; i < sizeof vectors / sizeof vectors[0]; i++)
        if (!posenc_shm__spec_hash_matches((const uint8_t *)vectors[i].msg, vectors[i].n,
                                           (const uint8_t *)vectors[i].hex)) {
            printf("error sha256 self-test: vector %zu\n", i);
            return 0;
        }
    return 1;
}

int main(int argc, char **argv)
{
    if (!crc_self_test() || !sha256_self_test()) return 4;
    posenc_shm_table t;
    int rc, first;
    if (argc >= 5 && strcmp(argv[1], "name") == 0) {
        rc = posenc_shm_attach(&t, argv[2], argv[3], atoi(argv[4]) ? POSENC_SHM_VERIFY : 0);
        first = 5;
    } else if (argc >= 4 && strcmp(argv[1], "path") == 0) {
        rc = posenc_shm_attach_path(&t, argv[2], atoi(argv[3]) ? POSENC_SHM_VERIFY : 0);
        first = 4;
    } else {
        fprintf(stderr, "usage: %s name DIR NAME VERIFY POS... | path FILE VERIFY POS...\n", argv[0]);
        return 2;
    }
    if (rc != POSENC_SHM_OK) {
        printf("error %d %s\n", rc, t.error);
        return 3;
    }
    if (posenc_shm_verify(&t) != POSENC_SHM_OK) {
        printf("error verify %d\n", posenc_shm_verify(&t));
        return 3;
    }
    printf("ok generation=%llu start=%lld stop=%lld width=%llu dtype=%u hash=%s name=%s checksum=%u\n",
           (unsigned long long)t.generation, (long long)t.start, (long long)t.stop, (unsigned long long)t.width,
           t.dtype, t.spec_hash, t.name, t.checksum);
    for (int i = first; i < argc; i++) {
        long long position = strtoll(argv[i], NULL, 10);
        const void *row = posenc_shm_row(&t, position);
        printf("row %lld", position);
        if (row == NULL) {
            printf(" none\n");
            continue;
        }
        for (uint64_t j = 0; j < t.width; j++) {
            double v = t.dtype == POSENC_SHM_FLOAT32 ? (double)((const float *)row)[j] : ((const double *)row)[j];
            printf(" %a", v);
        }
        printf("\n");
    }
    posenc_shm_detach(&t);
    return 0;
}
