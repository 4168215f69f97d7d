/* posenc_crmath.h on the inputs tests/test_crmath.py sends, for comparison with posenc.crmath and mpmath.
 *
 *   crmath_check < lines     each line "OP X Y" (X, Y hex floats; Y ignored by one-argument ops), one
 *                            hex result a line. OP: pow exp log powf logf (the public functions) or
 *                            pow! exp! log! powf! logf! (the accurate path alone, as if the fast one failed)
 *   crmath_check sweep STEP  every STEP-th positive finite float32: the largest relative error of the
 *                            float32 log's plain-double first try (pcr_log_d) against the double-double
 *                            log, as a power of two, and how many float32 logs the fast path left undecided */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "posenc_crmath.h"

static double apply(const char *op, double x, double y) {
    if (!strcmp(op, "pow")) return posenc_cr_pow(x, y);
    if (!strcmp(op, "exp")) return posenc_cr_exp(x);
    if (!strcmp(op, "log")) return posenc_cr_log(x);
    if (!strcmp(op, "powf")) return posenc_cr_powf((float)x, (float)y);
    if (!strcmp(op, "logf")) return posenc_cr_logf((float)x);
    if (!strcmp(op, "pow!")) return pcr_accurate(0, x, y, 53);
    if (!strcmp(op, "exp!")) return pcr_accurate(1, x, 0, 53);
    if (!strcmp(op, "log!")) return pcr_accurate(2, x, 0, 53);
    if (!strcmp(op, "powf!")) return pcr_accurate(0, x, y, 24);
    if (!strcmp(op, "logf!")) return pcr_accurate(2, x, 0, 24);
    fprintf(stderr, "unknown op %s\n", op);
    exit(2);
}

static int sweep(unsigned long step) {
    double worst = 0;
    unsigned long undecided = 0;
    for (unsigned long bits = 1; bits < 0x7f800000UL; bits += step) {
        float xf;
        unsigned int u = (unsigned int)bits;
        memcpy(&xf, &u, 4);
        double x = xf, hi, lo, r;
        if (x == 1.0) continue;
        pcr_log_dd(x, &hi, &lo);
        double err = fabs((pcr_log_d(x) - hi) - lo) / fabs(hi);
        if (err > worst) worst = err;
        if (!pcr_log_fast(x, 24, &r)) undecided++;
    }
    printf("log_d %.2f\nundecided %lu\n", log2(worst), undecided);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "sweep")) return sweep(strtoul(argv[2], NULL, 0));
    char line[256], op[16];
    double x, y = 0;
    while (fgets(line, sizeof line, stdin)) {
        if (sscanf(line, "%15s %la %la", op, &x, &y) < 2) continue;
        printf("%a\n", apply(op, x, y));
    }
    return 0;
}
