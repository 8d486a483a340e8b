/* Sorts records with the C library's qsort, as MiBench's qsort does: the "sort"
 * program whose memory trace hscm's report uses. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct rec { double key; char payload[24]; };

static int cmp(const void *a, const void *b) {
    double x = ((const struct rec *)a)->key, y = ((const struct rec *)b)->key;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    size_t n = argc > 1 ? (size_t)atol(argv[1]) : 1u << 20;
    struct rec *v = malloc(n * sizeof *v);
    if (!v) return 1;
    srand(11);
    for (size_t i = 0; i < n; i++) {
        v[i].key = (double)rand() / RAND_MAX;
        memset(v[i].payload, (int)(i & 0xff), sizeof v[i].payload);
    }
    qsort(v, n, sizeof *v, cmp);
    printf("%f %f\n", v[0].key, v[n - 1].key);
    return 0;
}
