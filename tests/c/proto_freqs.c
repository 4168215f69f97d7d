/* Prints the frequencies posenc_proto.h computes, one hex float per line, for
 * tests/test_binary_contract.py to compare with the Python library's bit for bit.
 * usage: proto_freqs vaswani BASE DIM | proto_freqs t2t MIN_TS MAX_TS DIM */
#define POSENC_PROTO_WANT_FREQS
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "posenc_proto.h"

int main(int argc, char **argv) {
    if (argc == 4 && strcmp(argv[1], "vaswani") == 0) {
        uint32_t dim = (uint32_t)atoi(argv[3]);
        for (uint32_t i = 0; i < (dim + 1) / 2; i++)
            printf("%a\n", posenc_vaswani_freq(strtod(argv[2], NULL), i, dim));
        return 0;
    }
    if (argc == 5 && strcmp(argv[1], "t2t") == 0) {
        uint32_t dim = (uint32_t)atoi(argv[4]);
        for (uint32_t i = 0; i < dim / 2; i++)
            printf("%a\n", posenc_t2t_freq(strtod(argv[2], NULL), strtod(argv[3], NULL), i, dim));
        return 0;
    }
    fprintf(stderr, "usage: proto_freqs vaswani BASE DIM | t2t MIN_TS MAX_TS DIM\n");
    return 2;
}
